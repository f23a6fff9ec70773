package datapathbench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// socketBacklog is how many unconnected sockets a socketFactory keeps ready.
const socketBacklog = 64

// socketFactory makes TCP sockets inside one network namespace on one locked
// thread, so the load's workers can connect and do their I/O on ordinary
// goroutines: a socket belongs to the namespace it was made in, whatever
// thread uses it later. Workers on locked threads (one netns.NS.Do each) pay
// a thread hand-off on every wake-up; that cost was the same for the direct
// and the Service run but made every run's rate swing by 10-20%.
type socketFactory struct {
	fds    chan int
	cancel context.CancelFunc
	done   chan struct{} // closed when the factory's goroutine has ended
	err    error         // why it ended; read after done
}

// startSockets starts a factory of sockets of addr's family inside ns. Stop
// must be called.
func startSockets(ctx context.Context, ns *netns.NS, family int) *socketFactory {
	ctx, cancel := context.WithCancel(ctx)
	f := &socketFactory{fds: make(chan int, socketBacklog), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.err = ns.Do(func() error {
			for {
				fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return fmt.Errorf("socket in %s: %w", ns.Name(), err)
				}
				select {
				case f.fds <- fd:
				case <-ctx.Done():
					unix.Close(fd)
					return nil
				}
			}
		})
	}()
	return f
}

// stop ends the factory and closes the sockets it made that nobody took.
func (f *socketFactory) stop() error {
	f.cancel()
	<-f.done
	for {
		select {
		case fd := <-f.fds:
			unix.Close(fd)
		default:
			return f.err
		}
	}
}

// dial connects a fresh socket of the factory to ap, bounded by
// requestTimeout; the connection is an ordinary net.Conn on the runtime's
// poller.
func (f *socketFactory) dial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	var fd int
	select {
	case fd = <-f.fds:
	case <-f.done:
		return nil, fmt.Errorf("socket factory stopped: %v", f.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var sa unix.Sockaddr
	if ap.Addr().Is4() {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	if err := unix.Connect(fd, sa); err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, fmt.Errorf("connect %s: %w", ap, err)
	}
	file := os.NewFile(uintptr(fd), "tcp")
	c, err := net.FileConn(file) // a dup on the poller; the original is closed
	file.Close()
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", ap, err)
	}
	if err := waitConnected(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect %s: %w", ap, err)
	}
	return c, nil
}

// waitConnected waits, bounded by requestTimeout, until c's non-blocking
// connect has finished, and returns its error.
func waitConnected(c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return fmt.Errorf("%T has no raw connection", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	if err := c.SetWriteDeadline(time.Now().Add(requestTimeout)); err != nil {
		return err
	}
	var cerr error
	werr := rc.Write(func(s uintptr) bool {
		v, err := unix.GetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			cerr = err
		case v != 0:
			cerr = syscall.Errno(v)
		default:
			if _, err := unix.Getpeername(int(s)); err == unix.ENOTCONN {
				return false // still connecting: wait until writable
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	if cerr != nil {
		return cerr
	}
	return c.SetWriteDeadline(time.Time{})
}

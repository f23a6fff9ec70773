package lab

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/netns"
)

// Dials from a node or a pod (see the package doc): a socket belongs to the
// cgroup of the process that creates it, for good, and a cgroup's sock_addr
// programs (the eBPF plane's connect translation) run for the sockets of
// that cgroup. A dial of a lab command from a node or a pod must therefore
// use a socket created by a process in the node's cgroup, while the command
// itself (the CLI, or a test calling this package in-process) stays where it
// is: moving it would move every thread of it, and a test binary would then
// hold the node's cgroup until it exits.
//
// So such a dial asks a socket source for its socket: `svcnet lab sockets`
// (ServeSockets), a child started in the place's namespace and node cgroup,
// which creates a socket per request and passes it back over a socketpair
// (SCM_RIGHTS). The dialer puts that socket in place of the one Go created
// (dup3 in net.Dialer's Control, before connect), so the connection is the
// source's socket: the place's namespace and the node's cgroup, connected
// and then used by the caller as any net.Conn.

// socketRequest is one request to a source: the socket's domain and type.
type socketRequest struct{ Domain, Type int32 }

// socketReplyLen is a reply's length: an errno (0 with the socket as
// SCM_RIGHTS).
const socketReplyLen = 4

// socketRequestTimeout bounds one request, the source's start included.
const socketRequestTimeout = 10 * time.Second

// socketKind returns the domain and type of a socket for Control's network
// ("tcp4", "udp6", ...).
func socketKind(network string) (domain, typ int, err error) {
	switch network {
	case "tcp4":
		return unix.AF_INET, unix.SOCK_STREAM, nil
	case "tcp6":
		return unix.AF_INET6, unix.SOCK_STREAM, nil
	case "udp4":
		return unix.AF_INET, unix.SOCK_DGRAM, nil
	case "udp6":
		return unix.AF_INET6, unix.SOCK_DGRAM, nil
	}
	return 0, 0, fmt.Errorf("socket source: no sockets for network %q", network)
}

// socketSource is a running `svcnet lab sockets` and its end of the socketpair.
type socketSource struct {
	where string
	mu    sync.Mutex
	conn  *net.UnixConn
	cmd   *exec.Cmd
	errb  *bytes.Buffer
	done  chan struct{}
}

// startSocketSource starts a socket source in namespace nsName and cgroup
// dir, from the svcnet binary.
func startSocketSource(binary, nsName, dir, where string) (*socketSource, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket source in %s: %w", where, err)
	}
	local, remote := os.NewFile(uintptr(fds[0]), "sockets"), os.NewFile(uintptr(fds[1]), "sockets")
	defer remote.Close()
	fc, err := net.FileConn(local)
	local.Close()
	if err != nil {
		return nil, fmt.Errorf("socket source in %s: %w", where, err)
	}
	cg, err := cgroup.Open(dir)
	if err != nil {
		fc.Close()
		return nil, fmt.Errorf("socket source in %s: %w", where, err)
	}
	defer cg.Close()
	s := &socketSource{where: where, conn: fc.(*net.UnixConn), errb: &bytes.Buffer{}, done: make(chan struct{})}
	s.cmd = netns.CommandIn(context.Background(), nsName, binary, "lab", "sockets")
	s.cmd.ExtraFiles = []*os.File{remote}
	s.cmd.Stderr = s.errb
	s.cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	if err := s.cmd.Start(); err != nil {
		fc.Close()
		return nil, fmt.Errorf("socket source in %s: %w", where, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	return s, nil
}

// socket returns a new socket of the source's, which the caller closes.
func (s *socketSource) socket(domain, typ int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.conn.SetDeadline(time.Now().Add(socketRequestTimeout)); err != nil {
		return -1, err
	}
	req, err := binary.Append(nil, binary.NativeEndian, socketRequest{Domain: int32(domain), Type: int32(typ)})
	if err != nil {
		return -1, err
	}
	if _, err := s.conn.Write(req); err != nil {
		return -1, s.failed(err)
	}
	b, oob := make([]byte, socketReplyLen), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := s.conn.ReadMsgUnix(b, oob)
	if err != nil {
		return -1, s.failed(err)
	}
	if n != socketReplyLen {
		return -1, s.failed(fmt.Errorf("a reply of %d bytes", n))
	}
	var fd = -1
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
			fd = fds[0]
		}
	}
	if errno := syscall.Errno(binary.NativeEndian.Uint32(b)); errno != 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("socket source in %s: socket: %w", s.where, errno)
	}
	if fd < 0 {
		return -1, s.failed(errors.New("a reply without a socket"))
	}
	return fd, nil
}

// failed describes a request that met err, with what the source wrote.
func (s *socketSource) failed(err error) error {
	select {
	case <-s.done:
		return fmt.Errorf("socket source in %s: %w (it exited: %s)", s.where, err, bytes.TrimSpace(s.errb.Bytes()))
	default:
		return fmt.Errorf("socket source in %s: %w", s.where, err)
	}
}

// control is net.Dialer's Control: it puts a socket of the source's in place
// of the one Go made (same domain and type, before connect), carrying over
// the options Go set on it.
func (s *socketSource) control(network, _ string, rc syscall.RawConn) error {
	domain, typ, err := socketKind(network)
	if err != nil {
		return err
	}
	fd, err := s.socket(domain, typ)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var adoptErr error
	if err := rc.Control(func(goFD uintptr) { adoptErr = adopt(int(goFD), fd, domain, typ) }); err != nil {
		return err
	}
	return adoptErr
}

// adopt makes descriptor dst refer to the socket src, with the options Go
// sets on a new socket (setDefaultSockopts) and non-blocking as Go's poller
// needs.
func adopt(dst, src, domain, typ int) error {
	if domain == unix.AF_INET6 {
		if err := copyIntOpt(dst, src, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY); err != nil {
			return err
		}
	}
	if typ == unix.SOCK_DGRAM {
		if err := copyIntOpt(dst, src, unix.SOL_SOCKET, unix.SO_BROADCAST); err != nil {
			return err
		}
	}
	if err := unix.SetNonblock(src, true); err != nil {
		return fmt.Errorf("socket source: %w", err)
	}
	if err := unix.Dup3(src, dst, unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("socket source: dup3: %w", err)
	}
	return nil
}

func copyIntOpt(dst, src, level, opt int) error {
	v, err := unix.GetsockoptInt(dst, level, opt)
	if err != nil {
		return fmt.Errorf("socket source: getsockopt %d/%d: %w", level, opt, err)
	}
	if err := unix.SetsockoptInt(src, level, opt, v); err != nil {
		return fmt.Errorf("socket source: setsockopt %d/%d: %w", level, opt, err)
	}
	return nil
}

// close ends the source (it exits when its end of the socketpair reads EOF)
// and waits up to 5 s for it, then kills it.
func (s *socketSource) close() {
	s.conn.Close()
	select {
	case <-s.done:
		return
	case <-time.After(5 * time.Second):
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// ServeSockets is `svcnet lab sockets`: it answers the socket requests read
// from conn, one socket each, created in this process's network namespace
// and cgroup, until conn reads EOF. Only TCP and UDP sockets of IPv4 and
// IPv6 are made.
func ServeSockets(conn *os.File) error {
	fd := int(conn.Fd())
	var req socketRequest
	b := make([]byte, binary.Size(req))
	for {
		n, _, _, _, err := unix.Recvmsg(fd, b, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sockets: %w", err)
		}
		if n == 0 {
			return nil // the lab command closed its end
		}
		if _, err := binary.Decode(b[:n], binary.NativeEndian, &req); err != nil || n != len(b) {
			return fmt.Errorf("sockets: a request of %d bytes", n)
		}
		if err := answer(fd, int(req.Domain), int(req.Type)); err != nil {
			return err
		}
	}
}

// answer makes one socket and sends it, or the errno that refused it.
func answer(fd, domain, typ int) error {
	var errno syscall.Errno = unix.EINVAL
	var oob []byte
	if (domain == unix.AF_INET || domain == unix.AF_INET6) && (typ == unix.SOCK_STREAM || typ == unix.SOCK_DGRAM) {
		s, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			defer unix.Close(s)
			errno, oob = 0, unix.UnixRights(s)
		} else if !errors.As(err, &errno) {
			errno = unix.EIO
		}
	}
	reply := binary.NativeEndian.AppendUint32(nil, uint32(errno))
	if err := unix.Sendmsg(fd, reply, oob, nil, 0); err != nil {
		return fmt.Errorf("sockets: %w", err)
	}
	return nil
}

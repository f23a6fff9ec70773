package trace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
)

// probeTimeout bounds one probe: a dropped packet is a connect that times
// out. It is below TCP's initial retransmission timeout (1 s), so a dropped
// SYN is sent once and the kernel's trace shows one first packet.
const probeTimeout = 900 * time.Millisecond

// probe sends the traced packet for real from the sender's namespace, from
// the traced source address and port, and says what came back: "connected",
// "refused" (a TCP reset), "timed out", "answered" (UDP).
func probe(ctx context.Context, nsName string, t Tuple) (string, error) {
	ns, err := netns.Open(nsName)
	if err != nil {
		return "", fmt.Errorf("probe: %w", err)
	}
	defer ns.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var outcome string
	err = ns.Do(func() error {
		switch t.Proto {
		case "tcp":
			d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(t.Src), Control: reuseAddr}
			c, err := d.DialContext(ctx, "tcp", t.Dst.String())
			switch {
			case err == nil:
				outcome = "connected"
				return c.Close()
			case errors.Is(err, syscall.ECONNREFUSED):
				outcome = "refused (TCP reset)"
			case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
				outcome = "unreachable (ICMP)"
			case isTimeout(ctx, err):
				outcome = "timed out (dropped)"
			default:
				outcome = "failed: " + err.Error()
			}
			return nil
		case "udp":
			d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(t.Src), Control: reuseAddr}
			c, err := d.DialContext(ctx, "udp", t.Dst.String())
			if err != nil {
				return fmt.Errorf("udp socket %s: %w", t.Src, err)
			}
			defer c.Close()
			if _, err := c.Write([]byte("hostname\n")); err != nil {
				return fmt.Errorf("udp send to %s: %w", t.Dst, err)
			}
			dl, _ := ctx.Deadline()
			_ = c.SetReadDeadline(dl)
			buf := make([]byte, 512)
			_, err = c.Read(buf)
			switch {
			case err == nil:
				outcome = "answered"
			case errors.Is(err, syscall.ECONNREFUSED):
				outcome = "refused (ICMP port unreachable)"
			default:
				outcome = "no answer (dropped)"
			}
			return nil
		}
		return fmt.Errorf("probe: protocol %s is not supported by --verify (tcp and udp are)", t.Proto)
	})
	return outcome, err
}

// isTimeout tells whether a dial ended by the probe's deadline. The dialer
// arms the socket with the context's deadline, and the poller's timer can
// fire ("i/o timeout") before the context's own timer has marked ctx done, so
// ctx.Err() alone misses it.
func isTimeout(ctx context.Context, err error) bool {
	var ne net.Error
	return ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// reuseAddr lets the probe bind its source port again soon after an earlier
// probe used it, and beside the socket that reserved it (reservePort).
func reuseAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

package members

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// queuedOf returns a function reporting whether a datagram waits unread in
// conn's receive queue (SIOCINQ: the size of the first one), or nil when
// conn is not a socket it can ask (a test's in-memory network). A failed
// query reports none waiting: the peer is then judged on Timeout alone.
func queuedOf(conn net.PacketConn) func() bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() bool {
		var n int
		var qerr error
		if err := raw.Control(func(fd uintptr) {
			n, qerr = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		}); err != nil {
			return false
		}
		return qerr == nil && n > 0
	}
}

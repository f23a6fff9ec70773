package announce

import (
	"encoding/binary"
	"syscall"

	"golang.org/x/sys/unix"
)

// linkEvent is what one rtnetlink message says about the watched interface.
type linkEvent struct {
	Gone   bool // deleted, or moved to another namespace
	Up     bool // administratively up and operationally running
	MAC    mac
	HasMAC bool
}

// parseLinkMessage extracts the event for interface ifindex from one
// rtnetlink message: RTM_NEWLINK gives its state and address, RTM_DELLINK and
// an ENODEV error (the answer to our RTM_GETLINK) mean it is gone. ok is false
// for messages about other interfaces and for anything else.
func parseLinkMessage(m syscall.NetlinkMessage, ifindex int) (ev linkEvent, ok bool) {
	switch m.Header.Type {
	case unix.NLMSG_ERROR:
		if len(m.Data) >= 4 && int32(binary.NativeEndian.Uint32(m.Data[:4])) == -int32(unix.ENODEV) {
			return linkEvent{Gone: true}, true
		}
		return ev, false
	case unix.RTM_NEWLINK, unix.RTM_DELLINK:
	default:
		return ev, false
	}
	if len(m.Data) < unix.SizeofIfInfomsg {
		return ev, false
	}
	index := int32(binary.NativeEndian.Uint32(m.Data[4:8]))
	flags := binary.NativeEndian.Uint32(m.Data[8:12])
	if int(index) != ifindex {
		return ev, false
	}
	if m.Header.Type == unix.RTM_DELLINK {
		return linkEvent{Gone: true}, true
	}
	ev.Up = flags&unix.IFF_UP != 0 && flags&unix.IFF_RUNNING != 0
	attrs, err := syscall.ParseNetlinkRouteAttr(&m)
	if err != nil {
		return ev, true
	}
	for _, a := range attrs {
		if a.Attr.Type == unix.IFLA_ADDRESS && len(a.Value) == len(ev.MAC) {
			copy(ev.MAC[:], a.Value)
			ev.HasMAC = true
		}
	}
	return ev, true
}

// getLinkRequest is an RTM_GETLINK request for interface ifindex; its answer
// arrives as an RTM_NEWLINK (or an NLMSG_ERROR) on the same socket.
func getLinkRequest(ifindex int, seq uint32) []byte {
	const n = unix.SizeofNlMsghdr + unix.SizeofIfInfomsg
	b := make([]byte, n)
	binary.NativeEndian.PutUint32(b[0:4], n)
	binary.NativeEndian.PutUint16(b[4:6], unix.RTM_GETLINK)
	binary.NativeEndian.PutUint16(b[6:8], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:12], seq)
	// b[12:16] port id 0: the kernel fills it in. ifinfomsg: family AF_UNSPEC.
	binary.NativeEndian.PutUint32(b[unix.SizeofNlMsghdr+4:], uint32(int32(ifindex)))
	return b
}

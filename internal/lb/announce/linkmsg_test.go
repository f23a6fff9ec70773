package announce

import (
	"encoding/binary"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// linkMsg builds an rtnetlink link message as the kernel sends it.
func linkMsg(typ uint16, index int32, flags uint32, addr []byte) syscall.NetlinkMessage {
	data := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(data[4:8], uint32(index))
	binary.NativeEndian.PutUint32(data[8:12], flags)
	if addr != nil {
		attr := make([]byte, (unix.SizeofRtAttr+len(addr)+3)&^3)
		binary.NativeEndian.PutUint16(attr[0:2], uint16(unix.SizeofRtAttr+len(addr)))
		binary.NativeEndian.PutUint16(attr[2:4], unix.IFLA_ADDRESS)
		copy(attr[unix.SizeofRtAttr:], addr)
		data = append(data, attr...)
	}
	return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: typ, Len: uint32(unix.SizeofNlMsghdr + len(data))}, Data: data}
}

func errMsg(errno syscall.Errno) syscall.NetlinkMessage {
	data := make([]byte, 4+unix.SizeofNlMsghdr)
	binary.NativeEndian.PutUint32(data, uint32(-int32(errno)))
	return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.NLMSG_ERROR}, Data: data}
}

func TestParseLinkMessage(t *testing.T) {
	const idx = 7
	up := uint32(unix.IFF_UP | unix.IFF_RUNNING | unix.IFF_LOWER_UP)
	cases := []struct {
		name   string
		msg    syscall.NetlinkMessage
		want   linkEvent
		wantOK bool
	}{
		{"up with address", linkMsg(unix.RTM_NEWLINK, idx, up, selfMAC[:]), linkEvent{Up: true, MAC: selfMAC, HasMAC: true}, true},
		{"admin up, no carrier", linkMsg(unix.RTM_NEWLINK, idx, unix.IFF_UP, selfMAC[:]), linkEvent{MAC: selfMAC, HasMAC: true}, true},
		{"down without address", linkMsg(unix.RTM_NEWLINK, idx, 0, nil), linkEvent{}, true},
		{"another interface", linkMsg(unix.RTM_NEWLINK, idx+1, up, selfMAC[:]), linkEvent{}, false},
		{"deleted", linkMsg(unix.RTM_DELLINK, idx, 0, nil), linkEvent{Gone: true}, true},
		{"another deleted", linkMsg(unix.RTM_DELLINK, idx+1, 0, nil), linkEvent{}, false},
		{"query answered ENODEV", errMsg(unix.ENODEV), linkEvent{Gone: true}, true},
		{"query acked", errMsg(0), linkEvent{}, false},
		{"address event", syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_NEWADDR}, Data: make([]byte, 32)}, linkEvent{}, false},
		{"short", syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_NEWLINK}, Data: make([]byte, 8)}, linkEvent{}, false},
	}
	for _, tc := range cases {
		ev, ok := parseLinkMessage(tc.msg, idx)
		if ok != tc.wantOK || ev != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v, %v", tc.name, ev, ok, tc.want, tc.wantOK)
		}
	}
}

func TestGetLinkRequest(t *testing.T) {
	msgs, err := syscall.ParseNetlinkMessage(getLinkRequest(7, 42))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("parse: %v, %d messages", err, len(msgs))
	}
	m := msgs[0]
	if m.Header.Type != unix.RTM_GETLINK || m.Header.Flags != unix.NLM_F_REQUEST || m.Header.Seq != 42 || len(m.Data) != unix.SizeofIfInfomsg {
		t.Errorf("header %+v, %d data bytes", m.Header, len(m.Data))
	}
	if idx := int32(binary.NativeEndian.Uint32(m.Data[4:8])); idx != 7 {
		t.Errorf("index %d, want 7", idx)
	}
}

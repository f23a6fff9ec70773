package syncbench

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// attr encodes one netlink attribute (padded to 4 bytes).
func attr(typ uint16, v []byte) []byte {
	b := make([]byte, nlaHdrLen, align4(nlaHdrLen+len(v)))
	binary.NativeEndian.PutUint16(b[0:2], uint16(nlaHdrLen+len(v)))
	binary.NativeEndian.PutUint16(b[2:4], typ)
	b = append(b, v...)
	return b[:cap(b)]
}

func nested(typ uint16, attrs ...[]byte) []byte {
	var v []byte
	for _, a := range attrs {
		v = append(v, a...)
	}
	return attr(typ|unix.NLA_F_NESTED, v)
}

// nlmsg encodes one netlink message of type typ with payload p.
func nlmsg(typ uint16, p []byte) []byte {
	b := make([]byte, nlmsgHdrLen, align4(nlmsgHdrLen+len(p)))
	binary.NativeEndian.PutUint32(b[0:4], uint32(nlmsgHdrLen+len(p)))
	binary.NativeEndian.PutUint16(b[4:6], typ)
	b = append(b, p...)
	return b[:cap(b)]
}

// newSetElemMsg encodes a NEWSETELEM notification as the kernel sends it.
func newSetElemMsg(family uint8, table, set string, keys ...[]byte) []byte {
	var elems [][]byte
	for _, k := range keys {
		elems = append(elems, nested(unix.NFTA_LIST_ELEM,
			nested(unix.NFTA_SET_ELEM_KEY, attr(unix.NFTA_DATA_VALUE, k)),
			nested(unix.NFTA_SET_ELEM_DATA, nested(unix.NFTA_DATA_VERDICT, attr(unix.NFTA_VERDICT_CODE, []byte{0, 0, 0, 0}))),
		))
	}
	p := []byte{family, 0, 0, 0}
	p = append(p, attr(unix.NFTA_SET_ELEM_LIST_TABLE, append([]byte(table), 0))...)
	p = append(p, attr(unix.NFTA_SET_ELEM_LIST_SET, append([]byte(set), 0))...)
	p = append(p, nested(unix.NFTA_SET_ELEM_LIST_ELEMENTS, elems...)...)
	return nlmsg(newSetElemTy, p)
}

// ipProtoPort is the key of `ipv4_addr . inet_proto . inet_service`.
func ipProtoPort(ip string, proto uint8, port uint16) []byte {
	a := netip.MustParseAddr(ip).As4()
	k := append([]byte{}, a[:]...)
	k = append(k, proto, 0, 0, 0)
	return append(k, byte(port>>8), byte(port), 0, 0)
}

func TestParseDatagram(t *testing.T) {
	var dgram []byte
	dgram = append(dgram, nlmsg(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWRULE, []byte{2, 0, 0, 0})...)
	dgram = append(dgram, newSetElemMsg(unix.NFPROTO_IPV4, "svcnet", "service-ips",
		ipProtoPort("10.96.0.5", unix.IPPROTO_TCP, 80), ipProtoPort("10.96.1.7", unix.IPPROTO_UDP, 53))...)
	dgram = append(dgram, newSetElemMsg(unix.NFPROTO_IPV4, "kube-proxy", "cluster-ips", netip.MustParseAddr("10.96.0.9").AsSlice())...)
	dgram = append(dgram, nlmsg(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWGEN, []byte{0, 0, 0, 0})...)

	var got []ElemEvent
	if err := parseDatagram(dgram, func(ev ElemEvent) { got = append(got, ev) }, nil); err != nil {
		t.Fatalf("parseDatagram: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d events, want 2: %+v", len(got), got)
	}
	if got[0].Table != "svcnet" || got[0].Set != "service-ips" || got[0].Family != unix.NFPROTO_IPV4 {
		t.Errorf("event 0 = %s/%s family %d", got[0].Table, got[0].Set, got[0].Family)
	}
	want := []netip.Addr{netip.MustParseAddr("10.96.0.5"), netip.MustParseAddr("10.96.1.7")}
	if diff := cmp.Diff(want, got[0].Addrs(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	if got[1].Table != "kube-proxy" || got[1].Set != "cluster-ips" || got[1].Addrs()[0] != netip.MustParseAddr("10.96.0.9") {
		t.Errorf("event 1 = %+v", got[1])
	}
}

func TestParseDatagramIPv6(t *testing.T) {
	key := netip.MustParseAddr("fd00:96::a").AsSlice()
	key = append(key, unix.IPPROTO_TCP, 0, 0, 0, 0, 80, 0, 0)
	var got []netip.Addr
	err := parseDatagram(newSetElemMsg(unix.NFPROTO_IPV6, "svcnet", "service-ips", key), func(ev ElemEvent) {
		got = append(got, ev.Addrs()...)
	}, nil)
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("fd00:96::a") {
		t.Fatalf("got %v, %v; want [fd00:96::a]", got, err)
	}
}

func TestParseDatagramMalformed(t *testing.T) {
	msg := newSetElemMsg(unix.NFPROTO_IPV4, "t", "s", ipProtoPort("10.96.0.5", unix.IPPROTO_TCP, 80))
	// A header claiming more bytes than the datagram has.
	bad := append([]byte{}, msg...)
	binary.NativeEndian.PutUint32(bad[0:4], uint32(len(msg)+8))
	if err := parseDatagram(bad, func(ElemEvent) {}, nil); !errors.Is(err, errShort) {
		t.Errorf("oversized message: err = %v, want errShort", err)
	}
	// An attribute claiming more bytes than its message has.
	bad = append([]byte{}, msg...)
	binary.NativeEndian.PutUint16(bad[nlmsgHdrLen+nfgenHdrLen:], 0xfff0)
	if err := parseDatagram(bad, func(ElemEvent) {}, nil); !errors.Is(err, errShort) {
		t.Errorf("oversized attribute: err = %v, want errShort", err)
	}
}

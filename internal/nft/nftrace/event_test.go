package nftrace

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"
)

// Unit tests of the event parser on hand-built netlink messages, laid out as
// nf_tables_trace.c builds them (big-endian values, nested verdict).

// traceMsgType is the netlink type of a trace event.
const traceMsgType = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_TRACE

// Header lengths: struct nlmsghdr, struct nfgenmsg.
const nlHdrLen, nfgenLen = unix.NLMSG_HDRLEN, 4

// appendAttr appends one attribute to b.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// cstring returns a NUL-terminated copy of s as an attribute payload.
func cstring(s string) []byte { return append([]byte(s), 0) }

func be32b(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be64b(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// message frames attrs as one netlink message of type typ with an nfgenmsg
// of family fam.
func message(typ uint16, fam uint8, attrs []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(nlHdrLen+nfgenLen+len(attrs)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, 0)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, fam, unix.NFNETLINK_V0, 0, 0)
	return append(b, attrs...)
}

func ipv4Header(proto uint8, src, dst string) []byte {
	h := make([]byte, 20)
	h[0], h[9] = 0x45, proto
	copy(h[12:], netip.MustParseAddr(src).AsSlice())
	copy(h[16:], netip.MustParseAddr(dst).AsSlice())
	return h
}

func ipv6Header(next uint8, src, dst string) []byte {
	h := make([]byte, 40)
	h[0], h[6] = 0x60, next
	copy(h[8:], netip.MustParseAddr(src).AsSlice())
	copy(h[24:], netip.MustParseAddr(dst).AsSlice())
	return h
}

func ports(sport, dport uint16, n int) []byte {
	h := make([]byte, n)
	binary.BigEndian.PutUint16(h, sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	return h
}

func TestParseEvents(t *testing.T) {
	// A rule event with a jump, a TCP SYN|ACK packet, interfaces, a mark and
	// conntrack attributes.
	var verdict []byte
	verdict = appendAttr(verdict, unix.NFTA_VERDICT_CODE, be32b(uint32(0xfffffffd))) // NFT_JUMP
	verdict = appendAttr(verdict, unix.NFTA_VERDICT_CHAIN, cstring("checks"))
	tcp := ports(40000, 8080, 20)
	tcp[13] = byte(SYN | ACK)
	var a []byte
	a = appendAttr(a, unix.NFTA_TRACE_NFPROTO, be32b(unix.NFPROTO_IPV4))
	a = appendAttr(a, unix.NFTA_TRACE_TYPE, be32b(unix.NFT_TRACETYPE_RULE))
	a = appendAttr(a, unix.NFTA_TRACE_ID, be32b(0xdeadbeef))
	a = appendAttr(a, unix.NFTA_TRACE_CHAIN, cstring("filter-input"))
	a = appendAttr(a, unix.NFTA_TRACE_TABLE, cstring("svc"))
	a = appendAttr(a, unix.NFTA_TRACE_RULE_HANDLE, be64b(16))
	a = appendAttr(a, unix.NFTA_TRACE_VERDICT|unix.NLA_F_NESTED, verdict)
	a = appendAttr(a, unix.NFTA_TRACE_MARK, be32b(0x4000))
	a = appendAttr(a, unix.NFTA_TRACE_IIF, be32b(3))
	a = appendAttr(a, unix.NFTA_TRACE_IIFTYPE, []byte{0, 1})
	a = appendAttr(a, unix.NFTA_TRACE_NETWORK_HEADER, ipv4Header(unix.IPPROTO_TCP, "10.200.0.1", "10.200.0.2"))
	a = appendAttr(a, unix.NFTA_TRACE_TRANSPORT_HEADER, tcp)
	a = appendAttr(a, unix.NFTA_TRACE_LL_HEADER, make([]byte, 14))
	a = appendAttr(a, nftaTraceCTState, be32b(8))
	a = appendAttr(a, nftaTraceCTDirection, []byte{0})
	a = appendAttr(a, nftaTraceCTID, be32b(77))
	a = appendAttr(a, nftaTraceCTStatus, be32b(0x188))
	a = appendAttr(a, 99, []byte{1, 2, 3}) // an attribute from the future
	rule := message(traceMsgType, unix.NFPROTO_IPV4, a)

	// A policy event of an inet chain on an IPv6 UDP packet, no mark.
	var p []byte
	p = appendAttr(p, unix.NFTA_TRACE_NFPROTO, be32b(unix.NFPROTO_IPV6))
	p = appendAttr(p, unix.NFTA_TRACE_TYPE, be32b(unix.NFT_TRACETYPE_POLICY))
	p = appendAttr(p, unix.NFTA_TRACE_ID, be32b(1))
	p = appendAttr(p, unix.NFTA_TRACE_CHAIN, cstring("output"))
	p = appendAttr(p, unix.NFTA_TRACE_TABLE, cstring("filter"))
	p = appendAttr(p, unix.NFTA_TRACE_POLICY, be32b(0)) // NF_DROP
	p = appendAttr(p, unix.NFTA_TRACE_OIF, be32b(1))
	p = appendAttr(p, unix.NFTA_TRACE_NETWORK_HEADER, ipv6Header(unix.IPPROTO_UDP, "fd00::1", "fd00::2"))
	p = appendAttr(p, unix.NFTA_TRACE_TRANSPORT_HEADER, ports(5353, 53, 8))
	p = appendAttr(p, nftaTraceCTState, be32b(64)) // untracked: state only
	policy := message(traceMsgType, unix.NFPROTO_INET, p)

	// A queue verdict with its queue number in the upper bits, and the
	// end-of-chain event: no handle, verdict continue.
	var q, qv []byte
	qv = appendAttr(qv, unix.NFTA_VERDICT_CODE, be32b(3|5<<16))
	q = appendAttr(q, unix.NFTA_TRACE_TYPE, be32b(unix.NFT_TRACETYPE_RULE))
	q = appendAttr(q, unix.NFTA_TRACE_RULE_HANDLE, be64b(9))
	q = appendAttr(q, unix.NFTA_TRACE_VERDICT|unix.NLA_F_NESTED, qv)
	queue := message(traceMsgType, unix.NFPROTO_IPV4, q)
	var c, cv []byte
	cv = appendAttr(cv, unix.NFTA_VERDICT_CODE, be32b(0xffffffff))
	c = appendAttr(c, unix.NFTA_TRACE_TYPE, be32b(unix.NFT_TRACETYPE_RETURN))
	c = appendAttr(c, unix.NFTA_TRACE_CHAIN, cstring("checks"))
	c = appendAttr(c, unix.NFTA_TRACE_VERDICT|unix.NLA_F_NESTED, cv)
	end := message(traceMsgType, unix.NFPROTO_IPV4, c)

	// Another nf_tables message in the datagram is skipped.
	other := message(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWTABLE, unix.NFPROTO_IPV4, appendAttr(nil, unix.NFTA_TABLE_NAME, cstring("x")))

	var datagram []byte
	for _, m := range [][]byte{rule, other, policy, queue, end} {
		datagram = append(datagram, m...)
	}
	got, err := parseDatagram(datagram, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{
		ID: 0xdeadbeef, Family: unix.NFPROTO_IPV4, NFProto: unix.NFPROTO_IPV4,
		Table: "svc", Chain: "filter-input", Handle: 16, Type: TypeRule,
		Verdict: Verdict{Code: Jump, Chain: "checks"}, Mark: 0x4000, Iif: 3,
		Packet: &Packet{Proto: unix.IPPROTO_TCP, Src: netip.MustParseAddrPort("10.200.0.1:40000"),
			Dst: netip.MustParseAddrPort("10.200.0.2:8080"), TCPFlags: SYN | ACK},
		CT: &CT{State: 8, HasEntry: true, ID: 77, Direction: 0, Status: 0x188},
	}, {
		ID: 1, Family: unix.NFPROTO_INET, NFProto: unix.NFPROTO_IPV6,
		Table: "filter", Chain: "output", Type: TypePolicy, Policy: Drop, Oif: 1,
		Packet: &Packet{Proto: unix.IPPROTO_UDP, Src: netip.MustParseAddrPort("[fd00::1]:5353"),
			Dst: netip.MustParseAddrPort("[fd00::2]:53")},
		CT: &CT{State: 64},
	}, {
		Family: unix.NFPROTO_IPV4, Handle: 9, Type: TypeRule, Verdict: Verdict{Code: Queue},
	}, {
		Family: unix.NFPROTO_IPV4, Chain: "checks", Type: TypeReturn, Verdict: Verdict{Code: Continue},
	}}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if !got[3].EndOfChain() || got[0].EndOfChain() || got[1].EndOfChain() {
		t.Error("EndOfChain: want it for the handle-less return event only")
	}

	// Bounded by n.
	if got, err := parseDatagram(datagram, 2); err != nil || len(got) != 2 {
		t.Errorf("parseDatagram with n 2: %d events, %v", len(got), err)
	}

	// String, for humans.
	for i, w := range []string{
		"trace id deadbeef ip svc filter-input rule handle 16 verdict jump checks mark 0x4000 packet: tcp 10.200.0.1:40000 → 10.200.0.2:8080 SYN|ACK iif #3 ct state new ct direction original ct id 77",
		"trace id 00000001 inet filter output policy drop packet: udp [fd00::1]:5353 → [fd00::2]:53 oif #1 ct state untracked",
		"trace id 00000000 ip   rule handle 9 verdict queue",
		"trace id 00000000 ip  checks return (end of chain) verdict continue",
	} {
		if s := got[i].String(); s != w {
			t.Errorf("String() of event %d:\n got %s\nwant %s", i, s, w)
		}
	}
}

func TestParseEventErrors(t *testing.T) {
	good := appendAttr(nil, unix.NFTA_TRACE_TABLE, cstring("svc"))
	for name, b := range map[string][]byte{
		"truncated attribute": message(traceMsgType, 2, good[:len(good)-2]),
		"bad attribute length": message(traceMsgType, 2, append(binary.NativeEndian.AppendUint16(nil, 2),
			0, 0)),
		"bad network header": message(traceMsgType, 2, appendAttr(nil, unix.NFTA_TRACE_NETWORK_HEADER, []byte{0x45, 0})),
		"truncated verdict": message(traceMsgType, 2, appendAttr(nil, unix.NFTA_TRACE_VERDICT,
			append(binary.NativeEndian.AppendUint16(nil, 40), unix.NFTA_VERDICT_CODE, 0))),
	} {
		if _, err := parseDatagram(b, 10); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
	// A message shorter than its header claims.
	msg := message(traceMsgType, 2, good)
	if _, err := parseDatagram(msg[:len(msg)-4], 10); err == nil || !strings.Contains(err.Error(), "netlink message") {
		t.Errorf("truncated message: %v", err)
	}
}

func TestNames(t *testing.T) {
	for got, want := range map[string]string{
		TCPFlags(0).String():                "-",
		(FIN | PSH | ACK).String():          "FIN|PSH|ACK",
		Code(Goto).String():                 "goto",
		Code(42).String():                   "verdict(42)",
		Verdict{Jump, "svc"}.String():       "jump svc",
		NFProto(unix.NFPROTO_IPV6).String(): "ip6",
		Type(9).String():                    "type(9)",
		ctStateString(2 | 8):                "established,new",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if f, ok := NFProto(unix.NFPROTO_IPV6).Family(); !ok || f != 6 {
		t.Errorf("ip6 family: %v %v", f, ok)
	}
	if _, ok := NFProto(unix.NFPROTO_INET).Family(); ok {
		t.Error("inet has an ipfamily.Family")
	}
}

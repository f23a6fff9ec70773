package conntrack

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

var (
	ap   = netip.MustParseAddrPort
	addr = netip.MustParseAddr
)

// udp returns a UDP flow from client to frontend dst, DNATed to replySrc.
func udp(client, dst, replySrc string) Flow {
	return Flow{Proto: ProtoUDP, OrigSrc: ap(client), OrigDst: ap(dst), ReplySrc: ap(replySrc), ReplyDst: ap(client)}
}

func withProto(f Flow, proto uint8) Flow { f.Proto = proto; return f }

// testWant is a small cluster: DNS on a ClusterIP (UDP 53 -> pods :5353),
// the same service in ipfamily.IPv6, an SCTP service, a UDP NodePort, a UDP service
// whose ClusterIP port equals the NodePort, and a UDP service without
// endpoints.
func testWant() Want {
	w := Want{}
	w.Add(Frontend{ProtoUDP, addr("10.96.0.10"), 53}, ap("192.168.1.5:5353"), ap("192.168.2.7:5353"))
	w.Add(Frontend{ProtoUDP, addr("fd00:96::a"), 53}, ap("[fd00:192:168:1::5]:5353"))
	w.Add(Frontend{ProtoSCTP, addr("10.96.0.30"), 3868}, ap("192.168.1.9:3868"))
	w.Add(Frontend{ProtoUDP, netip.Addr{}, 30053}, ap("192.168.1.5:5353"), ap("[fd00:192:168:1::5]:5353"))
	w.Add(Frontend{ProtoUDP, addr("10.96.0.40"), 30053}, ap("192.168.3.3:53"))
	w.Add(Frontend{ProtoUDP, addr("10.96.0.50"), 53})
	w.Add(Frontend{ProtoUDP, addr("172.26.236.180"), 53}, ap("192.168.1.5:5353")) // LB IP of DNS
	return w
}

func TestStale(t *testing.T) {
	tests := []struct {
		name string
		flow Flow
		want bool
	}{
		{"clusterIP, old backend", udp("192.168.1.2:40000", "10.96.0.10:53", "192.168.1.4:5353"), true},
		{"clusterIP, current backend", udp("192.168.1.2:40000", "10.96.0.10:53", "192.168.2.7:5353"), false},
		{"clusterIP, right IP wrong target port", udp("192.168.1.2:40000", "10.96.0.10:53", "192.168.2.7:53"), true},
		{"clusterIP, never DNATed (created while no endpoints)", udp("192.168.1.2:40000", "10.96.0.10:53", "10.96.0.10:53"), true},
		{"clusterIP, other port is no frontend", udp("192.168.1.2:40000", "10.96.0.10:54", "192.168.1.4:54"), false},
		{"unknown destination", udp("192.168.1.2:40000", "8.8.8.8:53", "8.8.8.8:53"), false},
		{"TCP never", withProto(udp("192.168.1.2:40000", "10.96.0.10:53", "192.168.1.4:5353"), ProtoTCP), false},
		{"ICMP never", withProto(udp("192.168.1.2:0", "10.96.0.10:0", "10.96.0.10:0"), 1), false},
		{"UDP flow to SCTP-only frontend", udp("192.168.1.2:40000", "10.96.0.30:3868", "192.168.1.1:3868"), false},
		{"SCTP, old backend", withProto(udp("192.168.1.2:40000", "10.96.0.30:3868", "192.168.1.1:3868"), ProtoSCTP), true},
		{"SCTP, current backend", withProto(udp("192.168.1.2:40000", "10.96.0.30:3868", "192.168.1.9:3868"), ProtoSCTP), false},
		{"LB IP, old backend", udp("172.26.236.10:40000", "172.26.236.180:53", "192.168.2.7:5353"), true},
		{"LB IP, current backend", udp("172.26.236.10:40000", "172.26.236.180:53", "192.168.1.5:5353"), false},
		{"NodePort on any address, old backend", udp("172.26.236.10:40000", "172.26.236.177:30053", "192.168.9.9:5353"), true},
		{"NodePort on another address, current backend", udp("172.26.236.10:40000", "127.0.0.1:30053", "192.168.1.5:5353"), false},
		{"NodePort, never DNATed", udp("172.26.236.10:40000", "172.26.236.177:30053", "172.26.236.177:30053"), true},
		{"NodePort IPv6, old backend", udp("[fd00:26:236::10]:40000", "[fd00:26:236::b1]:30053", "[fd00:192:168:1::6]:5353"), true},
		{"NodePort IPv6, current backend", udp("[fd00:26:236::10]:40000", "[fd00:26:236::b1]:30053", "[fd00:192:168:1::5]:5353"), false},
		{"clusterIP port equal to a NodePort: its own frontend decides", udp("192.168.1.2:40000", "10.96.0.40:30053", "192.168.3.3:53"), false},
		{"frontend without endpoints: kept", udp("192.168.1.2:40000", "10.96.0.50:53", "10.96.0.50:53"), false},
		{"IPv6 clusterIP, old backend", udp("[fd00:192:168:1::2]:40000", "[fd00:96::a]:53", "[fd00:192:168:1::4]:5353"), true},
		{"IPv6 clusterIP, current backend", udp("[fd00:192:168:1::2]:40000", "[fd00:96::a]:53", "[fd00:192:168:1::5]:5353"), false},
		{"4-in-6 mapped addresses", udp("[::ffff:192.168.1.2]:40000", "[::ffff:10.96.0.10]:53", "[::ffff:192.168.1.4]:5353"), true},
	}
	w := testWant()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Stale(tc.flow, w); got != tc.want {
				t.Errorf("Stale(%s) = %v, want %v", tc.flow, got, tc.want)
			}
		})
	}
}

func TestStaleFamilyOfEndpoints(t *testing.T) {
	// A NodePort of a single-stack ipfamily.IPv4 service says nothing about ipfamily.IPv6
	// flows to the same port (kube-proxy's ipfamily.IPv6 proxier would not know it).
	w := Want{}
	w.Add(Frontend{ProtoUDP, netip.Addr{}, 30053}, ap("192.168.1.5:5353"))
	f := udp("[fd00:26:236::10]:40000", "[fd00:26:236::b1]:30053", "[fd00:26:236::b1]:30053")
	if Stale(f, w) {
		t.Errorf("Stale(%s) = true with only IPv4 endpoints", f)
	}
	// A false entry is no endpoint.
	w = Want{{ProtoUDP, addr("10.96.0.10"), 53}: {ap("192.168.1.5:5353"): false}}
	if f := udp("192.168.1.2:40000", "10.96.0.10:53", "192.168.1.4:5353"); Stale(f, w) {
		t.Errorf("Stale(%s) = true with no serving endpoint", f)
	}
}

func TestWantAddNormalises(t *testing.T) {
	w := Want{}
	w.Add(Frontend{ProtoUDP, addr("::ffff:10.96.0.10"), 53}, ap("[::ffff:192.168.1.5]:5353"))
	w.Add(Frontend{ProtoUDP, addr("10.96.0.10"), 53}, ap("192.168.2.7:5353"))
	eps := w[Frontend{ProtoUDP, addr("10.96.0.10"), 53}]
	if len(w) != 1 || len(eps) != 2 || !eps[ap("192.168.1.5:5353")] || !eps[ap("192.168.2.7:5353")] {
		t.Errorf("Want = %v, want one unmapped IPv4 frontend with two endpoints", w)
	}
	if got := testWant().families(); len(got) != 2 || got[0] != ipfamily.IPv4 || got[1] != ipfamily.IPv6 {
		t.Errorf("families() = %v, want [IPv4 IPv6]", got)
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Frontend{ProtoUDP, netip.Addr{}, 30053}.String(), "udp *:30053"},
		{Frontend{ProtoSCTP, addr("fd00:96::a"), 53}.String(), "sctp [fd00:96::a]:53"},
		{udp("10.0.0.1:1", "10.96.0.10:53", "10.0.0.2:5353").String(), "udp 10.0.0.1:1->10.96.0.10:53 reply 10.0.0.2:5353->10.0.0.1:1"},
		{ipfamily.IPv6.String(), "IPv6"},
		{ipfamily.Family(7).String(), "family(7)"},
		{Flow{Proto: 47, OrigSrc: ap("10.0.0.1:0"), Zone: 3}.String(), "proto(47) 10.0.0.1:0->invalid AddrPort reply invalid AddrPort->invalid AddrPort zone=3"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

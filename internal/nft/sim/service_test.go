package sim

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// summary is the comparable part of a Result.
type summary struct {
	Verdict  Verdict
	Reject   RejectKind
	Delivery Delivery
	Final    Packet
}

func summarize(r Result) summary {
	return summary{Verdict: r.Verdict, Reject: r.Reject, Delivery: r.Delivery, Final: r.Final}
}

func families() []ipfamily.Family { return []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} }

// TestServices walks first packets of the fixture cluster's flows: what the
// proxy's rules must do to them.
func TestServices(t *testing.T) {
	for _, fam := range families() {
		a := fixtureAddrs(fam)
		tbl := proxyTable(t, a)
		newCt := func(p Packet) Packet { p.CtState = nft.CtNew; return p }
		forwarded := func(p Packet) summary {
			return summary{Verdict: Accepted, Delivery: DeliverForward, Final: newCt(p)}
		}
		for _, tc := range []struct {
			name string
			path Path
			rand []uint32
			pkt  Packet
			want summary
		}{{
			name: "ClusterIP from a pod: DNAT, no masquerade",
			pkt:  a.tcp(ap(a.pod, 40000), ap(a.svcA, 80)),
			want: forwarded(a.tcp(ap(a.pod, 40000), a.epsA[0])),
		}, {
			name: "ClusterIP from a pod, second endpoint",
			rand: []uint32{1, 0},
			pkt:  a.tcp(ap(a.pod, 40000), ap(a.svcA, 80)),
			want: forwarded(a.tcp(ap(a.pod, 40000), a.epsA[1])),
		}, {
			name: "ClusterIP from outside the cluster CIDR: masquerade toward a local pod",
			pkt:  a.tcp(ap(a.client, 40000), ap(a.svcA, 80)),
			want: forwarded(a.tcp(ap(a.bridge, 40000), a.epsA[0])),
		}, {
			name: "ClusterIP from outside the cluster CIDR: masquerade toward a remote pod",
			rand: []uint32{2, 1},
			pkt:  a.tcp(ap(a.client, 40000), ap(a.svcA, 80)),
			want: forwarded(a.tcp(ap(a.node, 40000), a.epsA[2])),
		}, {
			name: "hairpin: an endpoint through its own Service is masqueraded",
			pkt:  a.tcp(a.epsA[0], ap(a.svcA, 80)),
			want: forwarded(a.tcp(ap(a.bridge, a.epsA[0].Port()), a.epsA[0])),
		}, {
			name: "ClusterIP from a host process: DNAT at output, masquerade",
			path: PathOutput,
			pkt:  a.tcp(ap(a.node, 40000), ap(a.svcA, 80)),
			want: summary{Verdict: Accepted, Delivery: DeliverOut, Final: newCt(a.tcp(ap(a.bridge, 40000), a.epsA[0]))},
		}, {
			name: "NodePort on a local address: DNAT and masquerade",
			pkt:  a.tcp(ap(a.client, 40000), ap(a.node, nodePortA)),
			want: forwarded(a.tcp(ap(a.bridge, 40000), a.epsA[0])),
		}, {
			name: "NodePort on another node's address: untouched, forwarded",
			pkt:  a.tcp(ap(a.client, 40000), ap(a.otherNode, nodePortA)),
			want: forwarded(a.tcp(ap(a.client, 40000), ap(a.otherNode, nodePortA))),
		}, {
			name: "NodePort on loopback from the host: not a NodePort, delivered locally",
			path: PathOutput,
			pkt:  a.tcp(ap(a.lo, 40000), ap(a.lo, nodePortA)),
			want: summary{Verdict: Accepted, Delivery: DeliverLocal, Final: newCt(a.tcp(ap(a.lo, 40000), ap(a.lo, nodePortA)))},
		}, {
			name: "no endpoints, udp: ICMP port unreachable",
			pkt:  Packet{Family: fam, Proto: nft.ProtoUDP, Src: ap(a.pod, 40000), Dst: ap(a.svcB, 53)},
			want: summary{Verdict: Rejected, Reject: RejectICMP, Final: Packet{Family: fam, Proto: nft.ProtoUDP, Src: ap(a.pod, 40000), Dst: ap(a.svcB, 53), CtState: nft.CtNew}},
		}, {
			name: "no endpoints, tcp: TCP reset",
			pkt:  a.tcp(ap(a.pod, 40000), ap(a.svcB, 53)),
			want: summary{Verdict: Rejected, Reject: RejectTCPReset, Final: newCt(a.tcp(ap(a.pod, 40000), ap(a.svcB, 53)))},
		}, {
			name: "no endpoints, from a host process: TCP reset at output",
			path: PathOutput,
			pkt:  a.tcp(ap(a.node, 40000), ap(a.svcB, 53)),
			want: summary{Verdict: Rejected, Reject: RejectTCPReset, Final: newCt(a.tcp(ap(a.node, 40000), ap(a.svcB, 53)))},
		}, {
			name: "LoadBalancer from an allowed source range",
			pkt:  a.tcp(ap(a.allow.Addr().Next(), 40000), ap(a.lbC, 443)),
			want: forwarded(a.tcp(ap(a.node, 40000), a.epC)),
		}, {
			name: "LoadBalancer from outside its source ranges: dropped before DNAT",
			pkt:  a.tcp(ap(a.deny, 40000), ap(a.lbC, 443)),
			want: summary{Verdict: Dropped, Final: newCt(a.tcp(ap(a.deny, 40000), ap(a.lbC, 443)))},
		}, {
			name: "externalTrafficPolicy Local without local endpoints: dropped",
			pkt:  a.tcp(ap(a.client, 40000), ap(a.lbE, 80)),
			want: summary{Verdict: Dropped, Final: newCt(a.tcp(ap(a.client, 40000), ap(a.lbE, 80)))},
		}, {
			name: "not a Service: untouched",
			pkt:  a.tcp(ap(a.pod, 40000), ap(a.svcA, 81)),
			want: forwarded(a.tcp(ap(a.pod, 40000), ap(a.svcA, 81))),
		}, {
			name: "to the node itself: delivered locally",
			pkt:  a.tcp(ap(a.client, 40000), ap(a.node, 22)),
			want: summary{Verdict: Accepted, Delivery: DeliverLocal, Final: newCt(a.tcp(ap(a.client, 40000), ap(a.node, 22)))},
		}} {
			t.Run(fmt.Sprintf("%s/%s", fam, tc.name), func(t *testing.T) {
				path := tc.path
				if path == 0 {
					path = PathPrerouting
				}
				s := New(nil, tbl)
				res, err := s.Run(a.nodeContext(path, seq(tc.rand...)), tc.pkt)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.want, summarize(res), cmpOpts); d != "" {
					t.Errorf("result (-want +got):\n%s\ntrace:\n%s", d, renderTrace(res.Trace))
				}
			})
		}
	}
}

// TestRejectDetailNamesICMPv6 checks the reject step of an IPv6 packet.
func TestRejectDetailNamesICMPv6(t *testing.T) {
	a := fixtureAddrs(ipfamily.IPv6)
	s := New(nil, proxyTable(t, a))
	res, err := s.Run(a.nodeContext(PathPrerouting, nil), Packet{Family: ipfamily.IPv6, Proto: nft.ProtoUDP, Src: ap(a.pod, 1), Dst: ap(a.svcB, 53)})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Trace[len(res.Trace)-1]
	want := Step{Hook: HookForward, Table: "svcnet", Chain: "reject-chain", Rule: 1, Text: "reject", Action: ActReject, Detail: "icmpv6 port-unreachable"}
	if d := cmp.Diff(want, last, cmpOpts); d != "" {
		t.Errorf("last step (-want +got):\n%s", d)
	}
}

package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestConntrack: later packets of a connection skip the nat chains and get
// the translation conntrack recorded for the first, in both directions.
func TestConntrack(t *testing.T) {
	for _, fam := range families() {
		t.Run(fam.String(), func(t *testing.T) {
			a := fixtureAddrs(fam)
			s := New(nil, proxyTable(t, a))
			ctx := a.nodeContext(PathPrerouting, nil)
			client := ap(a.client, 40000)
			masq := ap(a.bridge, 40000)
			svc := ap(a.svcA, 80)
			ep := a.epsA[0]
			with := func(p Packet, st nft.CtState) Packet { p.CtState = st; return p }

			// A dropped first packet leaves no connection behind.
			if res, err := s.Run(ctx, a.tcp(ap(a.deny, 1), ap(a.lbC, 443))); err != nil || res.Verdict != Dropped {
				t.Fatalf("denied packet: %v %v", res.Verdict, err)
			}
			// Neither does enumerating.
			if _, err := s.Enumerate(ctx, a.tcp(ap(a.pod, 1), svc)); err != nil {
				t.Fatal(err)
			}
			if f := s.Flows(); len(f) != 0 {
				t.Fatalf("flows after a drop and an enumeration: %+v", f)
			}

			for _, tc := range []struct {
				name     string
				pkt      Packet
				rand     []uint32
				want     summary
				natSkips int // nat chains the packet skips
			}{{
				name: "first packet: DNAT and masquerade",
				pkt:  a.tcp(client, svc),
				want: summary{Verdict: Accepted, Delivery: DeliverForward, Final: with(a.tcp(masq, ep), nft.CtNew)},
			}, {
				name:     "next packet (classified established): same translation, nat chains skipped, whatever the draw",
				pkt:      a.tcp(client, svc),
				rand:     []uint32{2, 1},
				want:     summary{Verdict: Accepted, Delivery: DeliverForward, Final: with(a.tcp(masq, ep), nft.CtEstablished)},
				natSkips: 2,
			}, {
				name:     "reply: un-masqueraded at prerouting, un-DNATed at postrouting",
				pkt:      a.tcp(ep, masq),
				want:     summary{Verdict: Accepted, Delivery: DeliverForward, Final: with(a.tcp(svc, client), nft.CtEstablished)},
				natSkips: 2,
			}, {
				name:     "established packet of an unknown connection: no translation",
				pkt:      with(a.tcp(ap(a.client, 40001), svc), nft.CtEstablished),
				want:     summary{Verdict: Accepted, Delivery: DeliverForward, Final: with(a.tcp(ap(a.client, 40001), svc), nft.CtEstablished)},
				natSkips: 2,
			}, {
				name: "explicitly new: the nat chains run again",
				pkt:  with(a.tcp(client, svc), nft.CtNew),
				rand: []uint32{1, 0},
				want: summary{Verdict: Accepted, Delivery: DeliverForward, Final: with(a.tcp(masq, a.epsA[1]), nft.CtNew)},
			}} {
				res, err := s.Run(a.nodeContext(PathPrerouting, seq(tc.rand...)), tc.pkt)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.want, summarize(res), cmpOpts); d != "" {
					t.Errorf("%s (-want +got):\n%s\ntrace:\n%s", tc.name, d, renderTrace(res.Trace))
				}
				skips := 0
				for _, st := range res.Trace {
					if st.Action == ActNATSkip {
						skips++
					}
					if tc.natSkips > 0 && st.Action == ActChain && st.Chain != "" && st.Chain[:4] == "nat-" {
						t.Errorf("%s: nat chain %s evaluated", tc.name, st.Chain)
					}
				}
				if skips != tc.natSkips {
					t.Errorf("%s: %d nat chains skipped, want %d", tc.name, skips, tc.natSkips)
				}
			}

			want := []Flow{{Family: fam, Proto: nft.ProtoTCP, OrigSrc: client, OrigDst: svc, ReplySrc: ep, ReplyDst: masq}}
			if d := cmp.Diff(want, s.Flows(), cmpOpts); d != "" {
				t.Errorf("flows (-want +got):\n%s", d)
			}
		})
	}
}

// TestConntrackTraceOfReply pins the conntrack steps of a reply.
func TestConntrackTraceOfReply(t *testing.T) {
	a := fixtureAddrs(ipfamily.IPv4)
	s := New(nil, proxyTable(t, a))
	ctx := a.nodeContext(PathPrerouting, nil)
	if _, err := s.Run(ctx, a.tcp(ap(a.client, 40000), ap(a.svcA, 80))); err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, a.tcp(a.epsA[0], ap(a.bridge, 40000)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range res.Trace {
		switch st.Action {
		case ActConntrack, ActNATSkip, ActRoute:
			got = append(got, string(st.Hook)+" "+st.Action.String()+": "+st.Detail)
		}
	}
	want := []string{
		"prerouting nat-skip: ct state established: nat chains run only for the first packet of a connection",
		"prerouting conntrack: connection tcp 172.26.236.10:40000 → 10.96.0.50:80: daddr 192.168.1.1:40000 → 172.26.236.10:40000",
		"routing route: 172.26.236.10 is not local: forward",
		"postrouting nat-skip: ct state established: nat chains run only for the first packet of a connection",
		"postrouting conntrack: connection tcp 172.26.236.10:40000 → 10.96.0.50:80: saddr 192.168.1.10:8080 → 10.96.0.50:80",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("reply steps (-want +got):\n%s", d)
	}
}

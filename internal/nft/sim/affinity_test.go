package sim

import (
	"math/big"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestAffinity: ClientIP affinity keeps a client on its endpoint while the
// `update`d element lives, refreshes it on every new connection, and lets go
// after the timeout.
func TestAffinity(t *testing.T) {
	for _, fam := range families() {
		t.Run(fam.String(), func(t *testing.T) {
			// The simulator's clock is the bubble's: time.Sleep moves it.
			synctest.Test(t, func(t *testing.T) {
				a := fixtureAddrs(fam)
				s := New(time.Now, proxyTable(t, a))
				port := uint16(40000)
				// run sends a new connection from client with the random source
				// drawing r, and returns the endpoint it reached.
				run := func(client netip.Addr, r uint32) netip.AddrPort {
					t.Helper()
					port++
					res, err := s.Run(a.nodeContext(PathPrerouting, seq(r)), a.tcp(ap(client, port), ap(a.svcD, 80)))
					if err != nil {
						t.Fatal(err)
					}
					if res.Verdict != Accepted || res.Final.CtState != nft.CtNew {
						t.Fatalf("verdict %s ct %s, want accepted new:\n%s", res.Verdict, ctName(res.Final.CtState), renderTrace(res.Trace))
					}
					return res.Final.Dst
				}
				d1, d2 := a.epsD[0], a.epsD[1]

				// Enumerating before any packet sees both endpoints and keeps no state.
				outs, err := s.Enumerate(a.nodeContext(PathPrerouting, nil), a.tcp(ap(a.pod, 1), ap(a.svcD, 80)))
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(map[string]string{d1.String(): "1/2", d2.String(): "1/2"}, probs(outs)); d != "" {
					t.Errorf("enumerate before affinity (-want +got):\n%s", d)
				}

				steps := []struct {
					name    string
					advance time.Duration
					client  netip.Addr
					rand    uint32
					want    netip.AddrPort
				}{
					{"first connection draws the second endpoint", 0, a.pod, 1, d2},
					{"second connection sticks although the draw says first", time.Minute, a.pod, 0, d2},
					{"another client is not affected", 0, a.client, 0, d1},
					{"still sticky just before the timeout (refreshed a minute ago)", affinityD - time.Second, a.pod, 0, d2},
					{"refreshed: sticky 2h later", 2 * time.Hour, a.pod, 0, d2},
					{"expired after the timeout: drawn afresh", affinityD, a.pod, 0, d1},
				}
				for _, st := range steps {
					time.Sleep(st.advance)
					if got := run(st.client, st.rand); got != st.want {
						t.Errorf("%s: reached %s, want %s", st.name, got, st.want)
					}
				}

				// While sticky, Enumerate has one certain outcome.
				outs, err = s.Enumerate(a.nodeContext(PathPrerouting, nil), a.tcp(ap(a.pod, 1), ap(a.svcD, 80)))
				if err != nil {
					t.Fatal(err)
				}
				if len(outs) != 1 || outs[0].Result.Final.Dst != d1 || outs[0].Probability.Cmp(big.NewRat(1, 1)) != 0 {
					t.Errorf("enumerate while sticky: %v, want only %s", probs(outs), d1)
				}
			})
		})
	}
}

// TestAffinityTrace checks the update and lookup steps the tracer shows.
func TestAffinityTrace(t *testing.T) {
	a := fixtureAddrs(ipfamily.IPv4)
	s := New(nil, proxyTable(t, a))
	ctx := a.nodeContext(PathPrerouting, nil)
	var details []string
	for i, port := range []uint16{1000, 1001} {
		res, err := s.Run(ctx, a.tcp(ap(a.pod, port), ap(a.svcD, 80)))
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range res.Trace {
			if st.Action == ActUpdate || (st.Chain == "service-d" && st.Rule == 1) {
				details = append(details, st.Action.String()+": "+st.Detail)
			}
		}
		if i == 0 && res.Final.Dst != a.epsD[0] {
			t.Fatalf("first packet reached %s", res.Final.Dst)
		}
	}
	want := []string{
		"no-match: ip saddr @affinity-d1: 192.168.1.20 is not in the set",
		"update: added 192.168.1.20 in @affinity-d1, expires in 3h0m0s",
		"goto: ",
		"update: refreshed 192.168.1.20 in @affinity-d1, expires in 3h0m0s",
	}
	if d := cmp.Diff(want, details); d != "" {
		t.Errorf("affinity steps (-want +got):\n%s", d)
	}
}

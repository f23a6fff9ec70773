package nftables

import (
	"context"
	"fmt"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// takeovers are tables that follow featureTable in one sync, in which a
// port of another Service takes every frontend of default/lb (its
// ClusterIP, NodePort and LoadBalancer IP): lb gone, or moved to other
// frontends; the taker's ID before lb's, or after it.
func takeovers() []takeover {
	var out []takeover
	for _, taker := range []string{"aaa", "zzz"} {
		for _, lb := range []string{"gone", "moved"} {
			next := clonePorts(featureTable())
			for i, p := range next.Ports {
				if p.Name.Name != "lb" {
					continue
				}
				c := *p
				c.Name.Name = taker
				c.ID = fmt.Sprintf("%s/%s:%s/%s", c.Name.Namespace, c.Name.Name, c.Name.Port, c.Name.Protocol)
				next.Ports = append(next.Ports, &c)
				if lb == "gone" {
					next.Ports = append(next.Ports[:i], next.Ports[i+1:]...)
				} else {
					n := testNode()
					next.Ports[i] = withLB(withNodePort(sp("default", "lb", "http", p.Protocol, "10.96.0.99", 80, p.ClusterEndpoints...), 30099, n), "172.26.236.199")
				}
				break
			}
			sortPorts(next)
			out = append(out, takeover{fmt.Sprintf("%s taken by %s", lb, taker), next})
		}
	}
	return out
}

type takeover struct {
	name string
	next *servicetable.Table
}

// TestFrontendTakenOverInOneSync: a partial sync in which one Service port
// takes another's frontends applies, and leaves what a fresh render gives.
func TestFrontendTakenOverInOneSync(t *testing.T) {
	ctx := context.Background()
	for _, tc := range takeovers() {
		next := tc.next
		t.Run(tc.name, func(t *testing.T) {
			k := nft.NewFake()
			b := New(k)
			if _, err := b.Sync(ctx, featureTable(), false); err != nil {
				t.Fatal(err)
			}
			st, err := b.Sync(ctx, next, false)
			if err != nil || st.Full {
				t.Fatalf("partial sync: %+v, %v", st, err)
			}
			kernelMatches(t, k, next)
		})
	}
}

// TestKernelFrontendTakenOverInOneSync is TestFrontendTakenOverInOneSync on
// a throwaway namespace's kernel, which refuses an element added under a
// key it holds with another verdict: the partial sync applies, and a fresh
// backend finds nothing to change.
func TestKernelFrontendTakenOverInOneSync(t *testing.T) {
	ns := netnstest.New(t, "nfttake")
	conn, err := netlink.New(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	for _, tc := range takeovers() {
		next := tc.next
		t.Run(tc.name, func(t *testing.T) {
			b := New(conn, ipfamily.IPv4, ipfamily.IPv6)
			if _, err := b.Sync(ctx, featureTable(), true); err != nil {
				t.Fatal(err)
			}
			st, err := b.Sync(ctx, next, false)
			if err != nil || st.Full {
				t.Fatalf("partial sync: %+v, %v", st, err)
			}
			if st, err := New(conn, ipfamily.IPv4, ipfamily.IPv6).Sync(ctx, next, false); err != nil || st.TotalOps() != 0 {
				t.Fatalf("a fresh backend changed %d ops (err %v): the kernel is not what the table renders", st.TotalOps(), err)
			}
		})
	}
}

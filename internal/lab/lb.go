package lab

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// The lab's LoadBalancer pool: the IP plan's 172.26.236.180-199 on the node
// network, and their IPv6 twins fd00:26:236::b4-c7 in an IPv6 lab, announced
// by the nodes' speakers (svcnet proxy --announce l2: ARP, NDP).
const (
	PoolName   = "lab"
	PoolRange  = "172.26.236.180-172.26.236.199"
	PoolRange6 = "fd00:26:236::b4-fd00:26:236::c7"
)

// poolRanges are the pool's ranges in a lab of stack s, the primary family's first.
func poolRanges(s topology.Stack) []string {
	var out []string
	for _, f := range s {
		if f == ipfamily.IPv6 {
			out = append(out, PoolRange6)
		} else {
			out = append(out, PoolRange)
		}
	}
	if len(out) == 0 {
		out = []string{PoolRange}
	}
	return out
}

// defaultPool is the IPAddressPool every lab of stack s starts with.
func defaultPool(s topology.Stack) *pool.IPAddressPool {
	auto := true
	return &pool.IPAddressPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: pool.SchemeGroupVersion.String(), Kind: pool.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: PoolName},
		Spec:       pool.IPAddressPoolSpec{Addresses: poolRanges(s), AutoAssign: &auto, Mode: "l2"},
	}
}

// applyDefaultPool creates the lab's pool through the lab's control plane.
func (l *Lab) applyDefaultPool(ctx context.Context) error {
	obj := defaultPool(l.c.Info.Stack())
	if errs := l.c.CP.Apply(ctx, []controlplane.Object{{Origin: "lab up", Obj: obj}}); len(errs) > 0 {
		return fmt.Errorf("lab %s: address pool %s: %v", l.c.Names.Lab, PoolName, errs)
	}
	return nil
}

// Announcer returns the node (1-based) whose MAC address the external client's
// neighbour table holds for ip: the node that answered its ARP request or whose
// gratuitous ARP it took last. Send traffic to ip first.
func (l *Lab) Announcer(ip netip.Addr) (int, error) {
	mac, err := topology.ClientNeighbour(l.c.Names, ip)
	if err != nil {
		return 0, err
	}
	for i := 1; i <= l.c.Info.Nodes; i++ {
		m, err := topology.LinkMAC(l.c.Names.Node(i), "eth0")
		if err != nil {
			return 0, err
		}
		if bytes.Equal(m, mac) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("client: %s is at %s, which is no node's eth0", ip, mac)
}

// InPool reports whether ip is in the lab's pool: PoolRange or PoolRange6.
func InPool(ip netip.Addr) bool { return poolRange.Contains(ip) || poolRange6.Contains(ip) }

var poolRange, poolRange6 = mustRange(PoolRange), mustRange(PoolRange6)

func mustRange(s string) alloc.Range {
	r, err := pool.ParseRange(s)
	if err != nil {
		panic(err)
	}
	return r
}

// SetNodeLink connects node i to the node network or cuts it off (see
// topology.SetNodeLink).
func (l *Lab) SetNodeLink(i int, up bool) error { return topology.SetNodeLink(l.c.Names, i, up) }

// WaitAnnouncer waits (bounded by 10 s) until the client's neighbour entry for
// ip names a node that ok accepts, refreshing it with a ping-like request each
// round, and returns that node.
func (l *Lab) WaitAnnouncer(ctx context.Context, ip netip.Addr, ok func(node int) bool) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		node, err := l.Announcer(ip)
		if err == nil && ok(node) {
			return node, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: no acceptable node answers ARP after 10s (last: node%d, %v)", ip, node, err)
		}
		if _, err := l.Curl(ctx, Place{NS: l.c.Names.Client()}, fmt.Sprintf("http://%s:80/", ip), 1, 200*time.Millisecond); err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

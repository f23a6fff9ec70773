package podroutes

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/model"
)

func node(name string, addrs []string, cidrs ...string) *model.Node {
	n := &model.Node{Name: name}
	for _, a := range addrs {
		typ := "InternalIP"
		if a[0] == 'x' { // "x1.2.3.4": an ExternalIP
			typ, a = "ExternalIP", a[1:]
		}
		n.Addresses = append(n.Addresses, model.NodeAddress{Type: typ, Address: a})
	}
	for _, c := range cidrs {
		n.PodCIDRs = append(n.PodCIDRs, netip.MustParsePrefix(c))
	}
	return n
}

func rt(nodeName, dst, via string) Route {
	return Route{Node: nodeName, Dst: netip.MustParsePrefix(dst), Via: netip.MustParseAddr(via)}
}

// skipsOf renders errors as "node dst reason" for comparison.
func skipsOf(errs []error) []string {
	var out []string
	for _, e := range errs {
		var se *SkipError
		if !errors.As(e, &se) {
			out = append(out, "not a SkipError: "+e.Error())
			continue
		}
		for _, r := range []error{ErrOwnNode, ErrNoPodCIDR, ErrNoInternalIP, ErrDuplicateCIDR, ErrOverlapsLocal, ErrNextHopLocal, ErrNextHopNotOnLink, ErrExists} {
			if errors.Is(se, r) {
				d := ""
				if se.Dst.IsValid() {
					d = se.Dst.String()
				}
				out = append(out, fmt.Sprintf("%s %s %s", se.Node, d, r))
			}
		}
	}
	return out
}

func TestDesired(t *testing.T) {
	nodes := []*model.Node{
		node("node3", []string{"172.26.236.179", "fd00:26:236::179"}, "192.168.3.0/24", "fd00:192:168:3::/64"),
		node("node1", []string{"172.26.236.177", "fd00:26:236::177"}, "192.168.1.0/24", "fd00:192:168:1::/64"),
		node("node2", []string{"172.26.236.178", "172.26.236.250"}, "192.168.2.7/24", "fd00:192:168:2::/64"),
		node("nocidr", []string{"172.26.236.180"}),
		node("extonly", []string{"x203.0.113.9"}, "192.168.9.0/24"),
		node("zdup", []string{"172.26.236.181"}, "192.168.3.0/24", "192.168.10.0/24"),
		node("badip", []string{"not-an-ip", "fd00:26:236::182"}, "192.168.11.0/24", "fd00:192:168:b::/64"),
	}
	got, errs := Desired(nodes, "node1")
	want := []Route{
		rt("node2", "192.168.2.0/24", "172.26.236.178"),
		rt("node3", "192.168.3.0/24", "172.26.236.179"),
		rt("zdup", "192.168.10.0/24", "172.26.236.181"),
		rt("node3", "fd00:192:168:3::/64", "fd00:26:236::179"),
		rt("badip", "fd00:192:168:b::/64", "fd00:26:236::182"),
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("Desired routes (-want +got):\n%s", d)
	}
	wantSkips := []string{
		"badip 192.168.11.0/24 " + ErrNoInternalIP.Error(),
		"extonly 192.168.9.0/24 " + ErrNoInternalIP.Error(),
		"nocidr  " + ErrNoPodCIDR.Error(),
		"node1  " + ErrOwnNode.Error(),
		"node2 fd00:192:168:2::/64 " + ErrNoInternalIP.Error(),
		"zdup 192.168.3.0/24 " + ErrDuplicateCIDR.Error(),
	}
	if d := cmp.Diff(wantSkips, skipsOf(errs)); d != "" {
		t.Errorf("Desired skips (-want +got):\n%s", d)
	}
	// Determinism: any input order gives the same routes and reasons.
	for i := range 5 {
		perm := slices.Clone(nodes)
		slices.Reverse(perm)
		perm = append(perm[i:], perm[:i]...)
		g2, e2 := Desired(perm, "node1")
		if !slices.Equal(g2, got) || !slices.Equal(skipsOf(e2), skipsOf(errs)) {
			t.Fatalf("order %d changed the result: %v %v", i, g2, skipsOf(e2))
		}
	}
}

func TestUsable(t *testing.T) {
	local := []netip.Prefix{
		netip.MustParsePrefix("172.26.236.177/24"),
		netip.MustParsePrefix("192.168.1.1/24"),
		netip.MustParsePrefix("fd00:26:236::177/64"),
		netip.MustParsePrefix("fe80::1/64"),
	}
	in := []Route{
		rt("node2", "192.168.2.0/24", "172.26.236.178"),
		rt("self2", "192.168.5.0/24", "172.26.236.177"),
		rt("over", "192.168.0.0/16", "172.26.236.179"),
		rt("far", "192.168.4.0/24", "10.1.2.3"),
		rt("v6", "fd00:192:168:2::/64", "fd00:26:236::178"),
		rt("v6far", "fd00:192:168:3::/64", "fd00:99::1"),
	}
	got, errs := Usable(in, local)
	want := []Route{in[0], in[4]}
	if !slices.Equal(got, want) {
		t.Errorf("Usable = %v, want %v", got, want)
	}
	wantSkips := []string{
		"self2 192.168.5.0/24 " + ErrNextHopLocal.Error(),
		"over 192.168.0.0/16 " + ErrOverlapsLocal.Error(),
		"far 192.168.4.0/24 " + ErrNextHopNotOnLink.Error(),
		"v6far fd00:192:168:3::/64 " + ErrNextHopNotOnLink.Error(),
	}
	if d := cmp.Diff(wantSkips, skipsOf(errs)); d != "" {
		t.Errorf("Usable skips (-want +got):\n%s", d)
	}
}

func TestDiff(t *testing.T) {
	a := rt("n2", "192.168.2.0/24", "172.26.236.178")
	b := rt("n3", "192.168.3.0/24", "172.26.236.179")
	c := rt("n4", "192.168.4.0/24", "172.26.236.180")
	bMoved := rt("n3", "192.168.3.0/24", "172.26.236.190")
	stale := rt("", "192.168.9.0/24", "172.26.236.189")
	unnamed := func(r Route) Route { r.Node = ""; return r }
	for _, tc := range []struct {
		name       string
		want, have []Route
		plan       Plan
	}{
		{name: "empty"},
		{name: "all new", want: []Route{a, b}, plan: Plan{Add: []Route{a, b}}},
		{name: "in step", want: []Route{a, b}, have: []Route{unnamed(a), unnamed(b)}},
		{name: "stale deleted", want: []Route{a}, have: []Route{unnamed(a), stale}, plan: Plan{Delete: []Route{stale}}},
		{name: "moved replaced", want: []Route{a, bMoved, c}, have: []Route{unnamed(a), unnamed(b)}, plan: Plan{Replace: []Route{bMoved}, Add: []Route{c}}},
		{name: "duplicate destination", want: []Route{bMoved}, have: []Route{unnamed(b), unnamed(bMoved)}, plan: Plan{Delete: []Route{unnamed(b)}}},
		{name: "everything goes", have: []Route{unnamed(a), stale}, plan: Plan{Delete: []Route{unnamed(a), stale}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(tc.want, tc.have)
			if !slices.Equal(got.Add, tc.plan.Add) || !slices.Equal(got.Replace, tc.plan.Replace) || !slices.Equal(got.Delete, tc.plan.Delete) {
				t.Errorf("Diff = %+v, want %+v", got, tc.plan)
			}
			if got.Empty() != tc.plan.Empty() {
				t.Errorf("Empty = %v", got.Empty())
			}
		})
	}
}

package speaker

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/model"
)

func TestOwners(t *testing.T) {
	const vip = "172.26.236.180"
	all := []string{"node1", "node2", "node3"}
	without := func(drop string) []string {
		var out []string
		for _, n := range all {
			if n != drop {
				out = append(out, n)
			}
		}
		return out
	}
	// first is the node that owns vip when all are eligible.
	first := refOwner(vip, all...)
	others := without(first)
	nodesBut := func(notReady string, labels ...string) func(tx *model.Txn) {
		return func(tx *model.Txn) {
			for i := 1; i <= 3; i++ {
				n := labNode(i, fmt.Sprintf("node%d", i) != notReady)
				if n.Name == notReady && len(labels) > 0 {
					n = labNode(i, true, labels...)
				}
				tx.SetNode(n)
			}
		}
	}
	withClass := func(svc *model.Service, class string) *model.Service { svc.LoadBalancerClass = class; return svc }
	withMode := func(svc *model.Service, mode model.IPMode) *model.Service {
		svc.LoadBalancerIngress[0].IPMode = mode
		return svc
	}
	allAlive := map[string]bool{"node1": true, "node2": true, "node3": true}
	cases := []struct {
		name  string
		cfg   *Config // nil: IsDefault
		nodes func(tx *model.Txn)
		svcs  []*model.Service
		eps   []*model.EndpointSlice
		alive map[string]bool // nil: allAlive
		want  map[string]string
	}{
		{name: "cluster policy: any node", svcs: []*model.Service{lbSvc("web", model.TrafficPolicyCluster, vip)},
			want: map[string]string{vip: first}},
		{name: "local policy: only nodes with a ready endpoint", svcs: []*model.Service{lbSvc("web", model.TrafficPolicyLocal, vip)},
			eps:  []*model.EndpointSlice{slice("web", ep{"node1", "192.168.1.5", false}, ep{"node2", "192.168.2.5", true}, ep{"node3", "192.168.3.5", true})},
			want: map[string]string{vip: refOwner(vip, "node2", "node3")}},
		{name: "local policy without ready endpoints: no owner", svcs: []*model.Service{lbSvc("web", model.TrafficPolicyLocal, vip)},
			eps:  []*model.EndpointSlice{slice("web", ep{"node1", "192.168.1.5", false})},
			want: map[string]string{}},
		{name: "owner not ready", nodes: nodesBut(first), svcs: []*model.Service{lbSvc("web", model.TrafficPolicyCluster, vip)},
			want: map[string]string{vip: refOwner(vip, others...)}},
		{name: "owner excluded from load balancers", nodes: nodesBut(first, "node.kubernetes.io/exclude-from-external-load-balancers"),
			svcs: []*model.Service{lbSvc("web", model.TrafficPolicyCluster, vip)},
			want: map[string]string{vip: refOwner(vip, others...)}},
		{name: "owner not alive", svcs: []*model.Service{lbSvc("web", model.TrafficPolicyCluster, vip)},
			alive: map[string]bool{others[0]: true, others[1]: true},
			want:  map[string]string{vip: refOwner(vip, others...)}},
		{name: "nobody alive", svcs: []*model.Service{lbSvc("web", model.TrafficPolicyCluster, vip)},
			alive: map[string]bool{"node9": true}, want: map[string]string{}},
		{name: "shared IP: union of the eligible nodes", svcs: []*model.Service{lbSvc("dns-tcp", model.TrafficPolicyLocal, vip), lbSvc("dns-udp", model.TrafficPolicyLocal, vip)},
			eps: []*model.EndpointSlice{
				slice("dns-tcp", ep{first, "192.168.9.1", true}),
				slice("dns-udp", ep{others[0], "192.168.9.2", true}),
			},
			want: map[string]string{vip: refOwner(vip, first, others[0])}},
		{name: "other class", svcs: []*model.Service{withClass(lbSvc("web", model.TrafficPolicyCluster, vip), "example.com/lb")},
			cfg: &Config{IsDefault: true}, want: map[string]string{}},
		{name: "our default class", svcs: []*model.Service{withClass(lbSvc("web", model.TrafficPolicyCluster, vip), "svcnet.io/lb")},
			want: map[string]string{vip: first}},
		{name: "no class, not the default", svcs: []*model.Service{lbSvc("web", model.TrafficPolicyCluster, vip)},
			cfg: &Config{IsDefault: false}, want: map[string]string{}},
		{name: "custom class", svcs: []*model.Service{withClass(lbSvc("a", model.TrafficPolicyCluster, vip), "example.com/lb"), withClass(lbSvc("b", model.TrafficPolicyCluster, "172.26.236.181"), "svcnet.io/lb")},
			cfg: &Config{Class: "example.com/lb"}, want: map[string]string{vip: first}},
		{name: "node-ip mode addresses are skipped", svcs: []*model.Service{lbSvc("web", model.TrafficPolicyCluster, "172.26.236.178", "fd00:26:236::179", vip)},
			want: map[string]string{vip: first}},
		{name: "proxy mode is skipped", svcs: []*model.Service{withMode(lbSvc("web", model.TrafficPolicyCluster, vip), model.IPModeProxy)},
			want: map[string]string{}},
		{name: "unset mode counts as VIP", svcs: []*model.Service{withMode(lbSvc("web", model.TrafficPolicyCluster, vip), "")},
			want: map[string]string{vip: first}},
		{name: "not a LoadBalancer any more", svcs: []*model.Service{func() *model.Service {
			s := lbSvc("web", model.TrafficPolicyCluster, vip)
			s.Type = model.ServiceTypeClusterIP
			return s
		}()}, want: map[string]string{}},
		{name: "IPv6, local policy counts endpoints of the IP's family",
			svcs: []*model.Service{lbSvc("web", model.TrafficPolicyLocal, "fd00:26:236::180", vip)},
			eps: []*model.EndpointSlice{
				slice("web", ep{"node1", "192.168.1.5", true}),
				slice("web", ep{"node2", "fd00:192:168:2::5", true}),
			},
			want: map[string]string{"fd00:26:236::180": "node2", vip: "node1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{IsDefault: true}
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			nodes := cmpOr(tc.nodes, threeNodes)
			snap := snapshot(func(tx *model.Txn) {
				nodes(tx)
				for _, s := range tc.svcs {
					tx.SetService(s)
				}
				for _, sl := range tc.eps {
					tx.SetEndpointSlice(sl)
				}
			})
			alive := tc.alive
			if alive == nil {
				alive = allAlive
			}
			got := map[string]string{}
			for ip, n := range Owners(cfg, snap, alive) {
				got[ip.String()] = n
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Owners (-want +got):\n%s", diff)
			}
		})
	}
}

func cmpOr(f, def func(tx *model.Txn)) func(tx *model.Txn) {
	if f != nil {
		return f
	}
	return def
}

// poolIPs returns 172.26.236.180-199, the lab's LoadBalancer pool.
func poolIPs() []string {
	var out []string
	for i := 180; i <= 199; i++ {
		out = append(out, fmt.Sprintf("172.26.236.%d", i))
	}
	return out
}

func poolSnapshot() *model.Snapshot {
	return snapshot(func(tx *model.Txn) {
		threeNodes(tx)
		for i, ip := range poolIPs() {
			tx.SetService(lbSvc(fmt.Sprintf("svc%02d", i), model.TrafficPolicyCluster, ip))
		}
	})
}

// TestOwnersDistribution: the pool spreads over the nodes, a node's death moves
// only its own IPs, and nil alive counts everyone.
func TestOwnersDistribution(t *testing.T) {
	snap := poolSnapshot()
	cfg := Config{IsDefault: true}
	owners := Owners(cfg, snap, nil)
	count := map[string]int{}
	for _, ip := range poolIPs() {
		n := owners[netip.MustParseAddr(ip)]
		if n != refOwner(ip, "node1", "node2", "node3") {
			t.Errorf("%s owned by %q, want %q", ip, n, refOwner(ip, "node1", "node2", "node3"))
		}
		count[n]++
	}
	t.Logf("20 IPs over 3 nodes: %v", count)
	for _, n := range []string{"node1", "node2", "node3"} {
		if count[n] == 0 {
			t.Errorf("%s owns none of the 20 pool IPs: %v", n, count)
		}
	}
	after := Owners(cfg, snap, map[string]bool{"node1": true, "node3": true})
	for ip, was := range owners {
		if was != "node2" && after[ip] != was {
			t.Errorf("%s moved from %s to %s although only node2 died", ip, was, after[ip])
		}
		if was == "node2" && after[ip] == "node2" {
			t.Errorf("%s still owned by dead node2", ip)
		}
	}
}

// TestOwnersDeterministic: the same cluster built in another order gives the same
// owners, and the ordering matches known values (so a change of formula, which
// would make mixed-version nodes disagree, fails here).
func TestOwnersDeterministic(t *testing.T) {
	a := poolSnapshot()
	b := snapshot(func(tx *model.Txn) {
		ips := poolIPs()
		for i := len(ips) - 1; i >= 0; i-- {
			tx.SetService(lbSvc(fmt.Sprintf("svc%02d", i), model.TrafficPolicyCluster, ips[i]))
		}
		for i := 3; i >= 1; i-- {
			tx.SetNode(labNode(i, true))
		}
	})
	cfg := Config{IsDefault: true}
	oa, ob := Owners(cfg, a, nil), Owners(cfg, b, nil)
	if !maps.Equal(oa, ob) {
		t.Errorf("owners differ with insertion order:\n%v\n%v", oa, ob)
	}
	for i := range 5 {
		if again := Owners(cfg, a, nil); !maps.Equal(oa, again) {
			t.Fatalf("run %d differs: %v", i, again)
		}
	}
	// Checked by hand: printf 'node2#172.26.236.180' | sha256sum sorts first.
	golden := map[string]string{"172.26.236.180": "node2", "172.26.236.181": "node1", "172.26.236.199": "node3"}
	for ip, want := range golden {
		if got := oa[netip.MustParseAddr(ip)]; got != want {
			t.Errorf("%s: %s, want %s", ip, got, want)
		}
	}
}

func TestPick(t *testing.T) {
	if got := pick(nil, netip.MustParseAddr("10.0.0.1")); got != "" {
		t.Errorf("pick of no nodes = %q", got)
	}
	ip := netip.MustParseAddr("fd00:26:236::180")
	nodes := []string{"a", "b", "c", "d", "e"}
	if got, want := pick(nodes, ip), refOwner(ip.String(), nodes...); got != want {
		t.Errorf("pick = %s, want %s", got, want)
	}
	// Duplicate names hash alike: the tie goes to the (same) name.
	if got := pick([]string{"a", "a"}, ip); got != "a" {
		t.Errorf("pick with a tie = %q", got)
	}
}

// TestClaimsListServicesSorted: Services sharing an IP are listed by key,
// whatever order the snapshot yields them in.
func TestClaimsListServicesSorted(t *testing.T) {
	ip := "172.26.236.190"
	var want []model.ServiceKey
	snap := snapshot(func(tx *model.Txn) {
		for i := range 40 {
			s := lbSvc(fmt.Sprintf("share%02d", 39-i), model.TrafficPolicyCluster, ip)
			tx.SetService(s)
			want = append(want, s.Key())
		}
		tx.SetNode(labNode(1, true))
	})
	slices.SortFunc(want, model.CompareServiceKeys)
	for range 5 {
		c := claims(Config{IsDefault: true}, snap, nil)[netip.MustParseAddr(ip)]
		if c == nil || !slices.Equal(c.services, want) {
			t.Fatalf("claim of %s: %+v, want services %v", ip, c, want)
		}
	}
}

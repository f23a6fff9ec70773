package plan

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// created sets a pool's creationTimestamp n minutes after t0.
func created(p *pool.IPAddressPool, n int) *pool.IPAddressPool {
	p = p.DeepCopy()
	p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(n) * time.Minute))
	return p
}

// accepted gives a pool generation gen and the status condition Accepted True
// observed at observed.
func accepted(p *pool.IPAddressPool, gen, observed int64) *pool.IPAddressPool {
	p = p.DeepCopy()
	p.Generation = gen
	p.Status = &pool.IPAddressPoolStatus{Conditions: []metav1.Condition{{
		Type: pool.ConditionAccepted, Status: metav1.ConditionTrue, ObservedGeneration: observed, Reason: pool.ReasonAccepted}}}
	return p
}

// poolSummary is "name: admitted", "name: admitted; conflict: ..." or
// "name: refused: ..." per pool of out.
func poolSummary(t *testing.T, out Output) map[string]string {
	t.Helper()
	got := map[string]string{}
	var errs, conflicts int
	for _, r := range out.Pools {
		switch {
		case r.Admitted && r.Err == nil && r.Conflict != nil:
			got[r.Name] = "admitted; conflict: " + r.Conflict.Error()
			conflicts++
		case r.Admitted && r.Err == nil:
			got[r.Name] = "admitted"
		case !r.Admitted && r.Err != nil && r.Conflict == nil:
			got[r.Name] = "refused: " + r.Err.Error()
			errs++
		default:
			t.Errorf("pool %s: admitted %v, err %v, conflict %v", r.Name, r.Admitted, r.Err, r.Conflict)
		}
	}
	if len(out.PoolErrors) != errs || len(out.PoolConflicts) != conflicts {
		t.Errorf("PoolErrors %v, PoolConflicts %v do not match the pool results", out.PoolErrors, out.PoolConflicts)
	}
	return got
}

func TestDesiredRefusesConflictingPools(t *testing.T) {
	node3 := node("node3", true, "int:172.26.236.179", "ext:203.0.113.3")
	node3.Spec.PodCIDR = "192.168.3.0/24"
	node3.Spec.PodCIDRs = []string{"192.168.3.0/24", "fd00:192:168:3::/64"}
	notReady := node("node4", false, "int:172.26.236.176")
	svcCIDRs := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}
	a := created(ipPool("a", "", "172.26.236.180-172.26.236.199"), 1)
	cases := []struct {
		name      string
		in        Input
		wantPools map[string]string
		wantSvcs  map[string]string
	}{{
		name: "a newer overlapping pool is refused; the older keeps its allocations and serves new ones",
		in: Input{
			Pools: []*pool.IPAddressPool{created(ipPool("b", "", "172.26.236.190-172.26.236.195", "10.1.0.0/30"), 2), a},
			Services: []*corev1.Service{
				lbSvc("held", 1, status("172.26.236.190")),
				lbSvc("new", 2),
				lbSvc("wants-b", 3, ann(AnnotationAddressPool, "b")),
			},
		},
		wantPools: map[string]string{
			"a": "admitted",
			"b": "refused: IPAddressPool b: spec.addresses[0]: 172.26.236.190-172.26.236.195 overlaps IPAddressPool a (172.26.236.180-172.26.236.199)",
		},
		wantSvcs: map[string]string{
			"default/held": "a 172.26.236.190", "default/new": "a 172.26.236.180",
			"default/wants-b": "pending: requested pool b does not exist",
		},
	}, {
		name: "a pool earlier by name but created later is the one refused",
		in: Input{
			Pools:    []*pool.IPAddressPool{created(ipPool("zz-old", "", "10.0.0.0/24"), 1), created(ipPool("aa-new", "", "10.0.0.128/25"), 2)},
			Services: []*corev1.Service{lbSvc("s", 1, status("10.0.0.200"))},
		},
		wantPools: map[string]string{
			"zz-old": "admitted",
			"aa-new": "refused: IPAddressPool aa-new: spec.addresses[0]: 10.0.0.128-10.0.0.255 overlaps IPAddressPool zz-old (10.0.0.0-10.0.0.255)",
		},
		wantSvcs: map[string]string{"default/s": "zz-old 10.0.0.200"},
	}, {
		name: "an edited pool (generation past its admission) comes after the established one",
		in: Input{
			Pools: []*pool.IPAddressPool{
				accepted(created(ipPool("edited", "", "10.0.0.0/24"), 1), 2, 1),
				accepted(created(ipPool("kept", "", "10.0.0.128/25"), 5), 1, 1),
			},
			Services: []*corev1.Service{lbSvc("s", 1, status("10.0.0.200"))},
		},
		wantPools: map[string]string{
			"kept":   "admitted",
			"edited": "refused: IPAddressPool edited: spec.addresses[0]: 10.0.0.128-10.0.0.255 overlaps IPAddressPool kept (10.0.0.128-10.0.0.255)",
		},
		wantSvcs: map[string]string{"default/s": "kept 10.0.0.200"},
	}, {
		name: "pools holding node addresses, pod CIDRs or the service CIDRs are refused",
		in: Input{
			Pools: []*pool.IPAddressPool{
				created(ipPool("nodes", "", "172.26.236.170-172.26.236.179"), 1),
				created(ipPool("pods", "", "192.168.0.0/16"), 2),
				created(ipPool("svc", "", "10.96.0.0/24", "fd00:96::/120"), 3),
				created(ipPool("ext", "", "203.0.113.3/32"), 4),
			},
			Nodes:        []*corev1.Node{node3, notReady},
			ServiceCIDRs: svcCIDRs,
			Services:     []*corev1.Service{lbSvc("plain", 1)},
		},
		wantPools: map[string]string{
			"nodes": "refused: IPAddressPool nodes: spec.addresses[0]: holds Node node4's InternalIP 172.26.236.176; spec.addresses[0]: holds Node node3's InternalIP 172.26.236.179",
			"pods":  "refused: IPAddressPool pods: spec.addresses[0]: 192.168.3.0-192.168.3.255 overlaps Node node3's podCIDR 192.168.3.0/24",
			"svc": "refused: IPAddressPool svc: spec.addresses[0]: 10.96.0.0-10.96.0.255 overlaps the service CIDR 10.96.0.0/12; " +
				"spec.addresses[1]: fd00:96::-fd00:96::ff overlaps the service CIDR fd00:96::/108",
			"ext": "refused: IPAddressPool ext: spec.addresses[0]: holds Node node3's ExternalIP 203.0.113.3",
		},
		wantSvcs: map[string]string{"default/plain": "pending: no auto-assign IPAddressPool allows default/plain"},
	}, {
		name: "a node added into an established pool: kept, its address never handed out, its holder keeps it",
		in: Input{
			Pools: []*pool.IPAddressPool{accepted(created(ipPool("lab", "", "172.26.236.179-172.26.236.181"), 1), 1, 1)},
			Nodes: []*corev1.Node{node3},
			Services: []*corev1.Service{
				lbSvc("holder", 1, status("172.26.236.179")),
				lbSvc("asks", 2, ann(AnnotationLoadBalancerIPs, "172.26.236.179")),
				lbSvc("new", 3),
			},
		},
		wantPools: map[string]string{
			"lab": "admitted; conflict: IPAddressPool lab: spec.addresses[0]: holds Node node3's InternalIP 172.26.236.179; " +
				"these addresses are not handed out; a Service that holds one keeps it",
		},
		wantSvcs: map[string]string{
			"default/holder": "lab 172.26.236.179",
			"default/asks":   "pending: requested IP 172.26.236.179 is Node node3's InternalIP 172.26.236.179: pool lab does not hand it out",
			"default/new":    "lab 172.26.236.180",
		},
	}, {
		name: "Established decides instead of the status when set",
		in: Input{
			Pools: []*pool.IPAddressPool{
				accepted(created(ipPool("first", "", "10.0.0.0/24"), 1), 1, 1),
				created(ipPool("second", "", "10.0.0.0/25"), 2),
			},
			Established: func(p *pool.IPAddressPool, parsed alloc.Pool) bool {
				return p.Name == "second" && parsed.Ranges[0].String() == "10.0.0.0-10.0.0.127"
			},
		},
		wantPools: map[string]string{
			"second": "admitted",
			"first":  "refused: IPAddressPool first: spec.addresses[0]: 10.0.0.0-10.0.0.127 overlaps IPAddressPool second (10.0.0.0-10.0.0.127)",
		},
		wantSvcs: map[string]string{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Desired(Config{IsDefault: true}, tc.in)
			if d := cmp.Diff(tc.wantPools, poolSummary(t, out)); d != "" {
				t.Errorf("pools (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantSvcs, summarize(t, out)); d != "" {
				t.Errorf("services (-want +got):\n%s", d)
			}
			for _, err := range out.PoolErrors {
				if !errors.Is(err, pool.ErrOverlap) && !errors.Is(err, pool.ErrReserved) {
					t.Errorf("%v wraps neither ErrOverlap nor ErrReserved", err)
				}
			}
		})
	}
}

// Every recompute with the same input, in any order, refuses the same pools:
// the controller can restart, or see the objects in another order, and nothing
// moves.
func TestDesiredPoolsDeterministic(t *testing.T) {
	in := Input{
		Pools: []*pool.IPAddressPool{
			created(ipPool("c", "", "10.0.0.20-10.0.0.29"), 3),
			created(ipPool("a", "", "10.0.0.0-10.0.0.15"), 1),
			created(ipPool("b", "", "10.0.0.10-10.0.0.25"), 2),
		},
		Services: []*corev1.Service{lbSvc("x", 1, status("10.0.0.12")), lbSvc("y", 2, status("10.0.0.22"))},
	}
	first := Desired(Config{IsDefault: true}, in)
	want := map[string]string{
		"a": "admitted", "c": "admitted",
		// c is newer than b: b is refused before c is admitted, and c is
		// admitted because a refused pool blocks nothing.
		"b": "refused: IPAddressPool b: spec.addresses[0]: 10.0.0.10-10.0.0.15 overlaps IPAddressPool a (10.0.0.0-10.0.0.15)",
	}
	if d := cmp.Diff(want, poolSummary(t, first)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"default/x": "a 10.0.0.12", "default/y": "c 10.0.0.22"}, summarize(t, first)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for i := range 3 {
		in.Pools = append(in.Pools[1:], in.Pools[0])
		again := Desired(Config{IsDefault: true}, in)
		if d := cmp.Diff(poolSummary(t, first), poolSummary(t, again)); d != "" {
			t.Errorf("rotation %d (-first +again):\n%s", i, d)
		}
		if !strings.Contains(again.PoolErrors[0].Error(), "IPAddressPool b:") {
			t.Errorf("rotation %d: errors %v", i, again.PoolErrors)
		}
	}
}

package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

func TestConfigOurs(t *testing.T) {
	cases := []struct {
		cfg   Config
		class string
		want  bool
	}{
		{Config{}, "", false},
		{Config{}, DefaultClass, true},
		{Config{IsDefault: true}, "", true},
		{Config{IsDefault: true}, "other.io/lb", false},
		{Config{Class: "mine.io/lb"}, "mine.io/lb", true},
		{Config{Class: "mine.io/lb"}, DefaultClass, false},
		{Config{Class: "mine.io/lb", IsDefault: true}, "", true},
	}
	for _, tc := range cases {
		if got := tc.cfg.Ours(tc.class); got != tc.want {
			t.Errorf("%+v.Ours(%q) = %v, want %v", tc.cfg, tc.class, got, tc.want)
		}
	}
}

type planCase struct {
	name string
	cfg  Config
	in   Input
	want map[string]string // key -> summary (see summary)
}

func runPlan(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(t, Desired(tc.cfg, tc.in))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

var lab = ipPool("lab", "", "172.26.236.180-172.26.236.189")

func TestDesiredClassAndType(t *testing.T) {
	svcs := []*corev1.Service{
		lbSvc("none", 1),
		lbSvc("ours", 2, class(DefaultClass)),
		lbSvc("theirs", 3, class("other.io/lb"), status("10.9.9.9")),
		lbSvc("was-lb", 4, typ(corev1.ServiceTypeClusterIP), status("172.26.236.185")),
		lbSvc("nodeport", 5, typ(corev1.ServiceTypeNodePort)),
	}
	runPlan(t, []planCase{{
		name: "not the default class",
		cfg:  Config{},
		in:   Input{Pools: []*pool.IPAddressPool{lab}, Services: svcs},
		want: map[string]string{"default/ours": "lab 172.26.236.180", "default/was-lb": "released"},
	}, {
		name: "the default class",
		cfg:  Config{IsDefault: true},
		in:   Input{Pools: []*pool.IPAddressPool{lab}, Services: svcs},
		want: map[string]string{
			"default/none": "lab 172.26.236.180", "default/ours": "lab 172.26.236.181",
			"default/was-lb": "released",
		},
	}, {
		name: "a class of our own",
		cfg:  Config{Class: "mine.io/lb"},
		in:   Input{Pools: []*pool.IPAddressPool{lab}, Services: append(svcs, lbSvc("mine", 6, class("mine.io/lb")))},
		want: map[string]string{"default/mine": "lab 172.26.236.180", "default/was-lb": "released"},
	}})
}

func TestDesiredAnnotations(t *testing.T) {
	pools := []*pool.IPAddressPool{lab, ipPool("other", "", "10.0.0.0/30", "fd00::/126")}
	runPlan(t, []planCase{{
		name: "requests and sharing",
		cfg:  Config{IsDefault: true},
		in: Input{Pools: pools, Services: []*corev1.Service{
			lbSvc("ips", 1, dual(corev1.IPFamilyPolicyRequireDualStack), ann(AnnotationLoadBalancerIPs, " fd00::2 , 10.0.0.2")),
			lbSvc("spec", 2, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "172.26.236.188" }),
			lbSvc("both", 3, ann(AnnotationLoadBalancerIPs, "172.26.236.187"), func(s *corev1.Service) { s.Spec.LoadBalancerIP = "172.26.236.187" }),
			lbSvc("pool", 4, ann(AnnotationAddressPool, "other")),
			lbSvc("share-a", 5, ann(AnnotationAllowSharedIP, "web")),
			lbSvc("share-b", 6, ann(AnnotationAllowSharedIP, "web"), ports(443)),
		}},
		want: map[string]string{
			"default/ips":     "other 10.0.0.2,fd00::2",
			"default/spec":    "lab 172.26.236.188",
			"default/both":    "lab 172.26.236.187",
			"default/pool":    "other 10.0.0.0",
			"default/share-a": "lab 172.26.236.180",
			"default/share-b": "lab 172.26.236.180",
		},
	}, {
		name: "annotations that do not parse",
		cfg:  Config{IsDefault: true},
		in: Input{Pools: pools, Services: []*corev1.Service{
			lbSvc("bad-ip", 1, ann(AnnotationLoadBalancerIPs, "172.26.236.181,nope")),
			lbSvc("bad-spec", 2, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "fe80::1%eth0" }),
			lbSvc("disagree", 3, ann(AnnotationLoadBalancerIPs, "172.26.236.181"), func(s *corev1.Service) { s.Spec.LoadBalancerIP = "172.26.236.182" }),
			lbSvc("fine", 4),
		}},
		want: map[string]string{
			"default/bad-ip":   `pending: service default/bad-ip: annotation svcnet.io/loadBalancerIPs: "nope" is not an IP address`,
			"default/bad-spec": `pending: service default/bad-spec: spec.loadBalancerIP: "fe80::1%eth0" is not an IP address`,
			"default/disagree": `pending: service default/disagree: annotation svcnet.io/loadBalancerIPs "172.26.236.181" and spec.loadBalancerIP "172.26.236.182" disagree`,
			"default/fine":     "lab 172.26.236.180",
		},
	}})
	out := Desired(Config{IsDefault: true}, Input{Services: []*corev1.Service{lbSvc("x", 1, ann(AnnotationLoadBalancerIPs, "x"))}})
	if err := out.Results[0].Err; !errors.Is(err, alloc.ErrInvalidRequest) {
		t.Errorf("annotation error %v does not wrap alloc.ErrInvalidRequest", err)
	}
}

func TestDesiredNodeIP(t *testing.T) {
	nodes := []*corev1.Node{
		node("n3", true, "int:172.26.236.179", "int:fd00:26:236::179"),
		node("n1", true, "int:172.26.236.177", "ext:203.0.113.1"),
		node("n2", true, "int:172.26.236.178", "int:fd00:26:236::178"),
		node("n4", false, "int:172.26.236.180"),
		func() *corev1.Node {
			n := node("n5", true, "int:172.26.236.181")
			n.Labels = map[string]string{corev1.LabelNodeExcludeBalancers: ""}
			return n
		}(),
	}
	in := func(svcs ...*corev1.Service) Input {
		return Input{
			Pools:    []*pool.IPAddressPool{ipPool("nodes", "node-ip")},
			Services: svcs, Nodes: nodes,
			EndpointSlices: []*discoveryv1.EndpointSlice{
				slice("local", "n2=true", "n3=false", "n4=true"),
				slice("local-v6", "n3=", "n1=true"), // unset ready is ready
			},
		}
	}
	runPlan(t, []planCase{{
		name: "Cluster: every Ready node, ExternalIP first, in the Service's families",
		cfg:  Config{IsDefault: true},
		in: in(
			lbSvc("v4", 1),
			lbSvc("dual", 2, dual(corev1.IPFamilyPolicyPreferDualStack), ports(443)),
			lbSvc("v6", 3, func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
		),
		want: map[string]string{
			"default/v4":   "nodes 172.26.236.178,172.26.236.179,203.0.113.1",
			"default/dual": "nodes 172.26.236.178,172.26.236.179,203.0.113.1,fd00:26:236::178,fd00:26:236::179",
			"default/v6":   "nodes fd00:26:236::178,fd00:26:236::179",
		},
	}, {
		name: "Local: only Ready nodes with a ready endpoint",
		cfg:  Config{IsDefault: true},
		in: in(
			lbSvc("local", 1, local),
			lbSvc("local-v6", 2, local, ports(443), func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
			lbSvc("no-endpoints", 3, local, ports(8080)),
		),
		want: map[string]string{
			"default/local":        "nodes 172.26.236.178",
			"default/local-v6":     "nodes fd00:26:236::179",
			"default/no-endpoints": "pending: no Ready node has a ready endpoint of default/no-endpoints and an address of its families [IPv4] (externalTrafficPolicy Local)",
		},
	}, {
		name: "port clash on the node addresses",
		cfg:  Config{IsDefault: true},
		in:   in(lbSvc("a", 1), lbSvc("b", 2)),
		want: map[string]string{
			"default/a": "nodes 172.26.236.178,172.26.236.179,203.0.113.1",
			"default/b": "pending: pool nodes: TCP/80 on the nodes' IPv4 addresses is in use by default/a",
		},
	}})
	out := Desired(Config{IsDefault: true}, Input{Pools: []*pool.IPAddressPool{ipPool("nodes", "node-ip")}, Services: []*corev1.Service{lbSvc("a", 1)}})
	if err := out.Results[0].Err; !errors.Is(err, ErrNoNodes) {
		t.Errorf("no nodes: %v does not wrap ErrNoNodes", err)
	}
}

func TestDesiredPending(t *testing.T) {
	bad := ipPool("bad", "", "172.26.236.199-172.26.236.190")
	overlap := ipPool("lab2", "", "172.26.236.189/32")
	tiny := ipPool("tiny", "", "10.0.0.1-10.0.0.1")
	out := Desired(Config{IsDefault: true}, Input{
		Pools: []*pool.IPAddressPool{overlap, tiny, bad, lab, nil},
		Services: []*corev1.Service{
			lbSvc("a", 1, ann(AnnotationAddressPool, "tiny")),
			lbSvc("b", 2, ann(AnnotationAddressPool, "tiny")),
			lbSvc("c", 3, ann(AnnotationAddressPool, "bad")),
			lbSvc("d", 4, ann(AnnotationLoadBalancerIPs, "172.26.236.189"), status("172.26.236.180")),
			lbSvc("e", 5, ann(AnnotationLoadBalancerIPs, "172.26.236.189")),
			lbSvc("team/f", 6, ann(AnnotationAddressPool, "lab2")),
		},
	})
	want := map[string]string{
		"default/a": "tiny 10.0.0.1",
		"default/b": "pending: pool tiny has no free IPv4 address",
		"default/c": "pending: requested pool bad does not exist",
		"default/d": "lab 172.26.236.189",
		"default/e": "pending: 172.26.236.189 is in use by default/d, which does not share it: it has no sharing key",
		"team/f":    "pending: requested pool lab2 does not exist",
	}
	if d := cmp.Diff(want, summarize(t, out)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	var perrs []string
	for _, err := range out.PoolErrors {
		var pe *pool.Error
		if !errors.As(err, &pe) {
			t.Errorf("%v is not a *pool.Error", err)
		}
		perrs = append(perrs, err.Error())
	}
	wantErrs := []string{
		`IPAddressPool bad: spec.addresses[0]: "172.26.236.199-172.26.236.190": first address after last`,
		`IPAddressPool lab2: spec.addresses[0]: 172.26.236.189 overlaps IPAddressPool lab (172.26.236.180-172.26.236.189)`,
	}
	if d := cmp.Diff(wantErrs, perrs); d != "" {
		t.Errorf("pool errors (-want +got):\n%s", d)
	}
}

func TestDesiredKeepsCurrent(t *testing.T) {
	in := Input{Pools: []*pool.IPAddressPool{lab}, Services: []*corev1.Service{
		lbSvc("a", 1, status("172.26.236.186")),
		lbSvc("b", 2, status("172.26.236.186")), // taken by the older a
		lbSvc("c", 3, status("10.1.1.1")),       // outside every pool
		lbSvc("d", 4, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example"}, {IP: "172.26.236.188"}}
		}),
	}}
	runPlan(t, []planCase{{
		name: "restart",
		cfg:  Config{IsDefault: true},
		in:   in,
		want: map[string]string{
			"default/a": "lab 172.26.236.186", "default/b": "lab 172.26.236.180",
			"default/c": "lab 172.26.236.181", "default/d": "lab 172.26.236.188",
		},
	}})
}

func TestDesiredNamespaceLimits(t *testing.T) {
	east := ipPool("east", "", "10.0.0.1-10.0.0.9")
	east.Spec.ServiceAllocation = &pool.ServiceAllocation{
		NamespaceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "east"}}},
	}
	in := Input{
		Pools: []*pool.IPAddressPool{east},
		Namespaces: []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "e", Labels: map[string]string{"zone": "east"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{"zone": "west"}}},
		},
		Services: []*corev1.Service{lbSvc("e/a", 1), lbSvc("w/b", 2), lbSvc("unknown/c", 3)},
	}
	got := summarize(t, Desired(Config{IsDefault: true}, in))
	if got["e/a"] != "east 10.0.0.1" || !strings.HasPrefix(got["w/b"], "pending: no auto-assign IPAddressPool allows w/b") ||
		!strings.HasPrefix(got["unknown/c"], "pending: ") {
		t.Errorf("got %v", got)
	}
}

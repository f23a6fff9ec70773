//lint:file-ignore SA1019 legacy v1 Endpoints are among the objects a sequence of changes picks from

package controlplane

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// changingCluster is a small cluster whose objects a sequence of changes
// picks from: every Service type, requested ClusterIPs and node ports,
// LoadBalancers of a pool (one with a health check), a selector-less
// Service with legacy Endpoints, user EndpointSlices (one labelled as the
// controller's), Pods, Nodes, a pool and a Namespace.
func changingCluster() []runtime.Object {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	local := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	nodePort := func(np int32) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.Ports[0].NodePort = np }
	}
	userSlice := func(name, svc string, ip string, managed bool) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}}},
			Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(8080))}},
		}
		if managed {
			s.Labels[discoveryv1.LabelManagedBy] = controllerEndpointSlice
		}
		return s
	}
	objs := []runtime.Object{
		svc("a", noSelector), svc("b", withType(corev1.ServiceTypeNodePort), nodePort(30080)),
		svc("c", lb), svc("d", withClusterIP("10.96.0.50")), svc("e", withClusterIP("None")),
		svc("f", withType(corev1.ServiceTypeExternalName), noSelector, func(s *corev1.Service) { s.Spec.ExternalName = "example.com" }),
		svc("g", withPolicy(*prefer)), svc("h", lb, local), svc("i", noSelector),
		svc("web", withPorts(tcp("http", 80, intstr.FromString("http")))),
		userSlice("a-1", "a", "10.2.0.1", false), userSlice("a-2", "a", "10.2.0.2", false), userSlice("web-x", "web", "10.2.0.3", true),
		legacyEndpoints("i", corev1.EndpointSubset{Addresses: addrs("10.1.0.1")}),
		node("node1", "zone-a"), node("node2", "zone-b"),
		addrPool("lab", "172.26.236.180-172.26.236.183"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}},
	}
	for i := range 4 {
		p := pod(fmt.Sprintf("web-%d", i), "web", fmt.Sprintf("192.168.1.%d", i+1))
		p.Spec.NodeName = fmt.Sprintf("node%d", i%2+1)
		objs = append(objs, withContainerPort(p, "http", 8080))
	}
	return objs
}

// plainCluster is a cluster most of whose changes a Reconciler applies as
// such: selector-less Services (one asking for a ClusterIP, one for a node
// port, an ExternalName, a headless one) and their slices, and Services
// selecting Pods, in default; a LoadBalancer with Pods, the controller's
// slices and a pool in another namespace, whose events are stamped again
// at every change.
func plainCluster() []runtime.Object {
	objs := []runtime.Object{
		svc("a", noSelector), svc("b", noSelector, withType(corev1.ServiceTypeNodePort), func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 }),
		svc("d", noSelector, withClusterIP("10.96.0.50")), svc("e", noSelector, withClusterIP("None")),
		svc("f", withType(corev1.ServiceTypeExternalName), noSelector, func(s *corev1.Service) { s.Spec.ExternalName = "example.com" }),
		plainSlice("a-1", "a", "10.2.0.1"), plainSlice("b-1", "b", "10.2.0.2"),
		svc("web", inNamespace("lb"), withType(corev1.ServiceTypeLoadBalancer)),
		svc("api", withPorts(tcp("http", 80, intstr.FromString("http")))), svc("api-np", np(30100), func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "api"} }),
		node("node1", "zone-a"), addrPool("lab", "172.26.236.180-172.26.236.183"),
	}
	for i := range 3 {
		p := pod(fmt.Sprintf("web-%d", i), "web", fmt.Sprintf("192.168.1.%d", i+1))
		p.Namespace, p.Spec.NodeName = "lb", "node1"
		a := pod(fmt.Sprintf("api-%d", i), "api", fmt.Sprintf("192.168.2.%d", i+1), fmt.Sprintf("fd00:192:168:2::%d", i+1))
		a.Spec.NodeName = "node1"
		objs = append(objs, p, withContainerPort(a, "http", 8080))
	}
	return objs
}

// np makes a Service a NodePort asking for port.
func np(port int32) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, port }
}

func plainSlice(name, svc, ip string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}}},
		Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(8080))}},
	}
}

// edit returns a changed copy of obj; which change depends on k.
func edit(obj runtime.Object, k int) runtime.Object {
	switch o := obj.(type) {
	case *corev1.Service:
		c := o.DeepCopy()
		switch k % 7 {
		case 0:
			c.Spec.Ports[0].Port++
		case 1:
			c.Spec.Ports[0].Port = 0 // invalid
		case 2:
			c.Spec.ClusterIP, c.Spec.ClusterIPs = "10.96.0.50", nil // taken by d
		case 3:
			if c.Spec.Type == corev1.ServiceTypeClusterIP || c.Spec.Type == "" {
				c.Spec.Type = corev1.ServiceTypeNodePort
			}
			c.Spec.Ports[0].NodePort = 30080 // taken by b
		case 4:
			c.Spec.Type, c.Spec.ClusterIP, c.Spec.ClusterIPs = corev1.ServiceTypeLoadBalancer, "", nil
		case 5:
			c.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.26.236.190"}}
		default:
			c.Labels = map[string]string{"v": fmt.Sprint(k)}
		}
		return c
	case *discoveryv1.EndpointSlice:
		c := o.DeepCopy()
		switch k % 3 {
		case 0:
			c.Endpoints[0].Addresses = []string{fmt.Sprintf("10.2.1.%d", k%250+1)}
		case 1:
			c.AddressType = "" // invalid
		default:
			c.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Hour))
		}
		return c
	case *corev1.Pod:
		c := o.DeepCopy()
		if k%2 == 0 {
			return notReady(c)
		}
		c.Status.PodIP = fmt.Sprintf("192.168.2.%d", k%250+1)
		c.Status.PodIPs = []corev1.PodIP{{IP: c.Status.PodIP}}
		return c
	case *corev1.Node:
		c := o.DeepCopy()
		c.Labels["topology.kubernetes.io/zone"] = fmt.Sprintf("zone-%d", k%3)
		return c
	case *pool.IPAddressPool:
		c := o.DeepCopy()
		c.Spec.Addresses = []string{fmt.Sprintf("172.26.236.%d-172.26.236.%d", 180+k%3, 181+k%3)}
		return c
	}
	return obj // a Namespace, Endpoints: given again as they are
}

// FuzzReconciler: a Reconciler gives what Reconcile gives through any
// sequence of changes (objects edited, made invalid, removed, given again,
// added, duplicated, moved; the State carried, dropped or an older one;
// the clock moved; the Config changed), and never modifies an object of a
// Result it returned before, which a later Result may share.
func FuzzReconciler(f *testing.F) {
	for seed := range uint64(32) {
		ops := make([]byte, 16+seed%17)
		for i := range ops {
			ops[i] = byte(seed*31 + uint64(i)*17)
		}
		f.Add(seed, ops)
	}
	f.Fuzz(func(t *testing.T, seed uint64, ops []byte) {
		if len(ops) > 40 {
			ops = ops[:40]
		}
		rng := rand.New(rand.NewPCG(seed, uint64(len(ops))))
		plain := seed%2 == 1
		objs := changingCluster()
		if plain {
			objs = plainCluster()
		}
		var removed []runtime.Object
		cfg, now := dualStack, testNow
		var r Reconciler
		var prev, older State
		var last Result
		var kept []runtime.Object // copies of last's Services and slices
		for step, op := range ops {
			what := ""
			i := rng.IntN(len(objs))
			switch op % 10 {
			case 0, 1, 2:
				what = "edit"
				objs[i] = edit(objs[i], rng.IntN(1000))
			case 3:
				what = "remove"
				removed = append(removed, objs[i])
				objs = slices.Delete(objs, i, i+1)
			case 4:
				what = "give again"
				if len(removed) > 0 {
					j := rng.IntN(len(removed))
					objs = append(objs, removed[j])
					removed = slices.Delete(removed, j, j+1)
				}
			case 5:
				what = "add"
				name := fmt.Sprintf("n%d", step)
				typ := withType([]corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}[rng.IntN(3)])
				switch {
				case plain && rng.IntN(2) == 0:
					objs = append(objs, svc(name, typ, noSelector), plainSlice(name+"-1", name, fmt.Sprintf("10.3.0.%d", step+1)))
				case plain:
					objs = append(objs, svc(name, typ, withPolicy(*prefer), func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "api"} }))
				default:
					objs = append(objs, svc(name, typ))
				}
			case 6:
				what = "duplicate"
				objs = append(objs, objs[i])
			case 7:
				what = "move"
				j := rng.IntN(len(objs))
				objs[i], objs[j] = objs[j], objs[i]
			case 8:
				what = "state"
				if plain && rng.IntN(2) == 0 {
					what = "clock" // the State given back: a change still
				} else {
					prev = []State{{}, older, prev}[rng.IntN(3)]
				}
				now = now.Add(time.Duration(rng.IntN(3)) * time.Hour)
			default:
				what = "config"
				cfg = []Config{dualStack, DefaultConfig(), tiny}[rng.IntN(3)]
			}
			in := toObjects(objs...)
			got := r.Reconcile(cfg, in, prev, now)
			want := Reconcile(cfg, in, prev, now)
			if diff := cmp.Diff(want, got, sameErrorText); diff != "" {
				t.Fatalf("step %d (%s): Reconciler differs from Reconcile (-want +got):\n%s", step, what, diff)
			}
			for k, o := range resultObjects(last) {
				if diff := cmp.Diff(kept[k], o); diff != "" {
					t.Fatalf("step %d (%s): an object of the previous Result changed (-before +after):\n%s", step, what, diff)
				}
			}
			if n := len(r.memo.last); n > len(in) {
				t.Fatalf("step %d: the Reconciler remembers %d objects of the %d given", step, n, len(in))
			}
			last, kept = got, nil
			for _, o := range resultObjects(got) {
				kept = append(kept, o.DeepCopyObject())
			}
			older, prev = prev, got.State
		}
		if testing.Verbose() {
			t.Logf("%d of %d calls applied as a change", r.changes, len(ops))
		}
	})
}

// resultObjects lists the Services and EndpointSlices of res.
func resultObjects(res Result) []runtime.Object {
	var out []runtime.Object
	for _, s := range res.Services {
		out = append(out, s)
	}
	for _, s := range res.EndpointSlices {
		out = append(out, s)
	}
	return out
}

// TestReconcilerAllocationMoves: objects given again whose allocation or
// status the others change (the State dropped, so that allocation starts
// over; the pool removed) come out as Reconcile makes them, not as the
// last Result held them, and their prepared copies keep nothing of what
// the last reconcile wrote.
func TestReconcilerAllocationMoves(t *testing.T) {
	np := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }
	lb := withType(corev1.ServiceTypeLoadBalancer)
	lab := addrPool("lab", "172.26.236.180-172.26.236.183")
	b := svc("b", np)
	local := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	objs := []runtime.Object{svc("s0"), svc("s1"), svc("s2"), b, svc("c", lb, local), lab}
	var r Reconciler
	now := testNow
	check := func(step string, objs []runtime.Object, prev State) Result {
		t.Helper()
		got := r.Reconcile(tiny, toObjects(objs...), prev, now)
		want := Reconcile(tiny, toObjects(objs...), prev, now)
		if diff := cmp.Diff(want, got, sameErrorText); diff != "" {
			t.Fatalf("%s: Reconciler differs from Reconcile (-want +got):\n%s", step, diff)
		}
		return got
	}
	first := check("first", objs, State{})
	// Another Service, sorting last, asks for b's node port and c's health
	// check port: with no State, it gets them (requests are met before any
	// dynamic allocation) and b and c others; all keep their ClusterIPs.
	port := findService(t, first, "default", "b").Spec.Ports[0].NodePort
	health := findService(t, first, "default", "c").Spec.HealthCheckNodePort
	z := svc("z", np, withPorts(corev1.ServicePort{Name: "a", Port: 80, NodePort: port}, corev1.ServicePort{Name: "b", Port: 81, NodePort: health}))
	moved := check("b's node port asked for", append(slices.Clone(objs), z), State{})
	if got := findService(t, moved, "default", "b").Spec.Ports[0].NodePort; got == port || got == 0 {
		t.Fatalf("b kept node port %d (now %d) that z asked for", port, got)
	}
	if got := findService(t, moved, "default", "c").Spec.HealthCheckNodePort; got == health || got == 0 {
		t.Fatalf("c kept health check port %d (now %d) that z asked for", health, got)
	}
	for _, name := range []string{"b", "c"} {
		if was, is := findService(t, first, "default", name).Spec.ClusterIP, findService(t, moved, "default", name).Spec.ClusterIP; was != is {
			t.Fatalf("%s: ClusterIP %s became %s", name, was, is)
		}
	}
	// s1 gone, the State dropped and s2's ClusterIP asked for: s2 gets
	// another.
	ip := findService(t, first, "default", "s2").Spec.ClusterIP
	y := svc("y", withClusterIP(ip))
	again := check("s2's ClusterIP asked for", append(slices.Delete(slices.Clone(objs), 1, 2), y), State{})
	if got := findService(t, again, "default", "s2").Spec.ClusterIP; got == ip || got == "" {
		t.Fatalf("s2 kept ClusterIP %s (now %q) that y asked for", ip, got)
	}
	check("all back", objs, again.State)
	check("pool removed", slices.Delete(slices.Clone(objs), len(objs)-1, len(objs)), first.State)
	// An hour on with no State: every Service is created again.
	now = testNow.Add(time.Hour)
	check("created again", objs, State{})
}

// TestReconcilerAppliesChanges: Services and slices added, replaced and
// removed, the clock moved (events stamped again), are applied as changes
// and give what Reconcile gives; a LoadBalancer added is reconciled whole,
// and the call after it is a change again.
func TestReconcilerAppliesChanges(t *testing.T) {
	objs := plainCluster()
	s := &stepper{t: t, now: testNow}
	step := func(name string, change bool) { s.step(name, objs, change) }
	step("first", false)
	step("again", true)
	np := withType(corev1.ServiceTypeNodePort)
	objs = append(objs, svc("n1", noSelector, np), plainSlice("n1-1", "n1", "10.3.0.1"))
	step("NodePort added with its slice", true)
	objs = append(objs, svc("n2", noSelector, np, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30090 }),
		svc("n3", noSelector, withClusterIP("10.96.0.60")), svc("n4", noSelector, withClusterIP("None")))
	step("a node port, a ClusterIP, a headless Service asked for", true)
	i := slices.IndexFunc(objs, func(o runtime.Object) bool { s, ok := o.(*corev1.Service); return ok && s.Name == "n1" })
	objs[i] = svc("n1", noSelector, np, withPorts(corev1.ServicePort{Name: "http", Port: 81}))
	step("NodePort's port changed", true)
	j := slices.IndexFunc(objs, func(o runtime.Object) bool { s, ok := o.(*discoveryv1.EndpointSlice); return ok && s.Name == "a-1" })
	own := plainSlice("a-1", "a", "10.2.0.9")
	own.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Hour))
	objs[j] = own
	step("slice replaced, with its own creationTimestamp", true)
	s.now = s.now.Add(time.Hour)
	objs = slices.Delete(objs, i, i+1)
	step("an hour on, NodePort removed", true)
	k := slices.IndexFunc(objs, func(o runtime.Object) bool { s, ok := o.(*discoveryv1.EndpointSlice); return ok && s.Name == "b-1" })
	objs[k] = plainSlice("b-1", "b", "10.2.0.10")
	step("slice edited: created when first given", true)
	objs = append(objs, svc("n1", noSelector, np))
	step("NodePort given again", true)
	objs = append(objs, svc("n9", noSelector, withClusterIP("10.96.0.60")))
	step("ClusterIP of n3 asked for (an error)", false)
	objs = objs[:len(objs)-1]
	step("error gone", false)
	step("again", true)
	objs = append(objs, svc("sel", withPolicy(*prefer), func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "api"} }))
	step("a dual-stack Service selecting Pods added", true)
	if got := len(slicesOf(Reconcile(dualStack, toObjects(objs...), s.prev, s.now), "default", "sel")); got != 2 {
		t.Fatalf("sel has %d slices, want one per family", got)
	}
	objs[len(objs)-1] = svc("sel", withPorts(tcp("http", 81, intstr.FromString("http"))), func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "api"} })
	step("its port changed", true)
	relabelled := objs[len(objs)-1].(*corev1.Service).DeepCopy()
	relabelled.Labels = map[string]string{"tier": "api"}
	objs[len(objs)-1] = relabelled
	step("its labels changed: its slices keep their names", true)
	objs = objs[:len(objs)-1]
	step("it removed", true)
	objs = append(objs, svc("lb2", withType(corev1.ServiceTypeLoadBalancer)))
	step("LoadBalancer added", false)
	objs = append(objs, svc("n5", noSelector))
	step("after it, a Service added", true)
	if s.r.changes != 14 {
		t.Fatalf("%d calls applied as changes, want 14", s.r.changes)
	}
}

// TestReconcilerCarriesErrorsAndWarnings: an object in error about itself
// (an invalid Service) and a LoadBalancer pending (its pool exhausted)
// do not keep a small change from being applied as one; their errors and
// warnings carry over, as Reconcile gives them. Objects that move (origins
// shift), a duplicate or an allocation that met another Service's, and the
// object in error going, are reconciled whole.
func TestReconcilerCarriesErrorsAndWarnings(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	objs := append(plainCluster(), svc("bad", noSelector, withPorts(corev1.ServicePort{Name: "http", Port: 0})))
	for i := range 4 { // the pool has 4 addresses and lb/web holds one
		objs = append(objs, svc(fmt.Sprintf("lb%d", i), noSelector, lb))
	}
	s := &stepper{t: t, now: testNow}
	var got Result
	step := func(name string, change bool) { got = s.step(name, objs, change) }
	step("first", false)
	if len(got.Errors) != 1 || len(got.Warnings) != 1 {
		t.Fatalf("errors %v, warnings %v; want the invalid Service's and one LoadBalancer pending", got.Errors, got.Warnings)
	}
	step("again", true)
	objs = append(objs, svc("n1", noSelector))
	step("a Service added after the others", true)
	if len(got.Errors) != 1 || len(got.Warnings) != 1 {
		t.Fatalf("errors %v, warnings %v after a change; want them carried over", got.Errors, got.Warnings)
	}
	objs = objs[:len(objs)-1]
	step("it removed", true)
	objs = slices.Insert(objs, 0, runtime.Object(svc("n0", noSelector)))
	step("a Service added first: every origin moves", false)
	step("again", true)
	objs = append(objs, svc("n2", noSelector, withClusterIP("10.96.0.50")))
	step("a ClusterIP taken asked for", false)
	step("again, with that error", false)
	objs = objs[:len(objs)-1]
	step("that error gone", false)
	step("again", true)
	objs = append(objs, objs[0])
	step("a duplicate", false)
	objs = objs[:len(objs)-1]
	step("the duplicate gone", false)
	i := slices.IndexFunc(objs, func(o runtime.Object) bool { s, ok := o.(*corev1.Service); return ok && s.Name == "bad" })
	objs[i] = svc("bad", noSelector)
	step("the invalid Service fixed", false)
	if len(got.Errors) != 0 {
		t.Fatalf("errors %v; want none", got.Errors)
	}
	step("again", true)
}

// stepper calls a Reconciler as reloads do, each step with the objects
// given now and the State the last one returned: it holds each Result
// equal to Reconcile's and checks whether the step was applied as a
// change.
type stepper struct {
	t    *testing.T
	r    Reconciler
	prev State
	now  time.Time
}

func (s *stepper) step(name string, objs []runtime.Object, change bool) Result {
	s.t.Helper()
	before := s.r.changes
	in := toObjects(objs...)
	got := s.r.Reconcile(dualStack, in, s.prev, s.now)
	want := Reconcile(dualStack, in, s.prev, s.now)
	if diff := cmp.Diff(want, got, sameErrorText); diff != "" {
		s.t.Fatalf("%s: Reconciler differs from Reconcile (-want +got):\n%s", name, diff)
	}
	if applied := s.r.changes > before; applied != change {
		s.t.Fatalf("%s: applied as a change: %v, want %v", name, applied, change)
	}
	s.prev = got.State
	return got
}

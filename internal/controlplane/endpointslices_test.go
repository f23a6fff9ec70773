package controlplane

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// endpointsByPod maps Pod name to its endpoint in the slices of Service default/name.
func endpointsByPod(t *testing.T, res Result, name string) map[string]discoveryv1.Endpoint {
	t.Helper()
	out := map[string]discoveryv1.Endpoint{}
	for _, s := range slicesOf(res, "default", name) {
		for _, ep := range s.Endpoints {
			if _, dup := out[ep.TargetRef.Name]; dup {
				t.Errorf("pod %s appears twice", ep.TargetRef.Name)
			}
			out[ep.TargetRef.Name] = ep
		}
	}
	return out
}

type conds struct{ Ready, Serving, Terminating bool }

func condsOf(ep discoveryv1.Endpoint) conds {
	return conds{*ep.Conditions.Ready, *ep.Conditions.Serving, *ep.Conditions.Terminating}
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Minute)}
	return p
}

func phase(p *corev1.Pod, ph corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = ph
	return p
}

func TestEndpointConditions(t *testing.T) {
	pods := []runtimeObject{
		pod("ready", "web", "192.168.1.1"),
		notReady(pod("unready", "web", "192.168.1.2")),
		terminating(pod("term-serving", "web", "192.168.1.3")),
		terminating(notReady(pod("term-unready", "web", "192.168.1.4"))),
		phase(pod("succeeded", "web", "192.168.1.5"), corev1.PodSucceeded),
		phase(pod("failed", "web", "192.168.1.6"), corev1.PodFailed),
		pod("no-ip", "web"),
		pod("other-app", "db", "192.168.1.7"),
	}
	tests := []struct {
		name    string
		publish bool
		want    map[string]conds
	}{
		{"ready is PodReady and not terminating", false, map[string]conds{
			"ready":        {true, true, false},
			"unready":      {false, false, false},
			"term-serving": {false, true, true},
			"term-unready": {false, false, true},
		}},
		{"publishNotReadyAddresses makes every endpoint ready", true, map[string]conds{
			"ready":        {true, true, false},
			"unready":      {true, false, false},
			"term-serving": {true, true, true},
			"term-unready": {true, false, true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("web", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = tc.publish })
			res := run(t, append([]runtimeObject{s}, pods...)...)
			got := map[string]conds{}
			for name, ep := range endpointsByPod(t, res, "web") {
				got[name] = condsOf(ep)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions by pod (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamedPortsPerPod(t *testing.T) {
	s := svc("web", withPorts(tcp("http", 80, intstr.FromString("http")), tcp("metrics", 9100, intstr.FromInt32(9100))))
	res := run(t, s,
		withContainerPort(pod("a1", "web", "192.168.1.1"), "http", 8080),
		withContainerPort(pod("a2", "web", "192.168.1.2"), "http", 8080),
		withContainerPort(pod("b", "web", "192.168.1.3"), "http", 9090),
		pod("c", "web", "192.168.1.4"), // declares no "http": only metrics
	)
	got := map[string][]string{}
	for _, sl := range slicesOf(res, "default", "web") {
		var ports, pods []string
		for _, p := range sl.Ports {
			ports = append(ports, fmt.Sprintf("%s=%d", *p.Name, *p.Port))
		}
		for _, ep := range sl.Endpoints {
			pods = append(pods, ep.TargetRef.Name)
		}
		got[strings.Join(ports, ",")] = pods
	}
	want := map[string][]string{
		"http=8080,metrics=9100": {"a1", "a2"},
		"http=9090,metrics=9100": {"b"},
		"metrics=9100":           {"c"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods by slice ports (-want +got):\n%s", diff)
	}
}

func TestThousandsOfPods(t *testing.T) {
	const n = 1050
	objs := []runtimeObject{svc("big")}
	for i := 0; i < n; i++ {
		objs = append(objs, pod(fmt.Sprintf("big-%04d", i), "big", fmt.Sprintf("192.168.%d.%d", i/200, i%200+1)))
	}
	res := run(t, objs...)
	slices := slicesOf(res, "default", "big")
	var sizes []int
	names := map[string]bool{}
	for _, s := range slices {
		sizes = append(sizes, len(s.Endpoints))
		names[s.Name] = true
		if errs := validateSlice(s.DeepCopy()); len(errs) != 0 {
			t.Errorf("slice %s is not valid: %v", s.Name, errs.ToAggregate())
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(sizes)))
	if want := []int{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 50}; !cmp.Equal(want, sizes) {
		t.Errorf("slice sizes = %v, want %v", sizes, want)
	}
	if len(names) != len(slices) {
		t.Errorf("slice names are not unique")
	}
	if got := len(endpointsByPod(t, res, "big")); got != n {
		t.Errorf("%d pods in slices, want %d, each once", got, n)
	}
}

func TestSliceLabelsAndOwner(t *testing.T) {
	s := svc("web", func(s *corev1.Service) {
		s.Labels = map[string]string{"team": "a", discoveryv1.LabelManagedBy: "me", corev1.IsHeadlessService: "x"}
	})
	res := run(t, s, svc("db", withClusterIP("None")), pod("web-1", "web", "192.168.1.1"))
	web := findService(t, res, "default", "web")
	sl := slicesOf(res, "default", "web")
	if len(sl) != 1 {
		t.Fatalf("got %d slices for web, want 1", len(sl))
	}
	wantLabels := map[string]string{"team": "a", discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	if diff := cmp.Diff(wantLabels, sl[0].Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: web.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
	if diff := cmp.Diff(wantOwner, sl[0].OwnerReferences); diff != "" {
		t.Errorf("ownerReferences (-want +got):\n%s", diff)
	}
	if sl[0].GenerateName != "web-" || !strings.HasPrefix(sl[0].Name, "web-") || len(sl[0].Name) != len("web-")+5 ||
		sl[0].APIVersion != "discovery.k8s.io/v1" || sl[0].Kind != "EndpointSlice" || sl[0].UID == "" {
		t.Errorf("slice metadata: %v %v", sl[0].TypeMeta, sl[0].ObjectMeta)
	}
	db := slicesOf(res, "default", "db")
	if len(db) != 1 {
		t.Fatalf("got %d slices for the headless db, want its placeholder", len(db))
	}
	if v, ok := db[0].Labels[corev1.IsHeadlessService]; !ok || v != "" {
		t.Errorf("headless slice labels = %v, want %s=\"\"", db[0].Labels, corev1.IsHeadlessService)
	}
	if db[0].Endpoints == nil || len(db[0].Endpoints) != 0 || db[0].Ports == nil || len(db[0].Ports) != 0 {
		t.Errorf("placeholder slice = %+v, want empty (non-nil) endpoints and ports", db[0])
	}
}

func TestHostnameAndSubdomain(t *testing.T) {
	withHost := func(p *corev1.Pod, host, sub string) *corev1.Pod {
		p.Spec.Hostname, p.Spec.Subdomain = host, sub
		return p
	}
	res := run(t, svc("db", withClusterIP("None")),
		withHost(pod("db-0", "db", "192.168.1.1"), "db-0", "db"),
		withHost(pod("db-1", "db", "192.168.1.2"), "db-1", "other"),
		withHost(pod("db-2", "db", "192.168.1.3"), "", "db"),
	)
	got := map[string]string{}
	for name, ep := range endpointsByPod(t, res, "db") {
		got[name] = "<nil>"
		if ep.Hostname != nil {
			got[name] = *ep.Hostname
		}
	}
	want := map[string]string{"db-0": "db-0", "db-1": "<nil>", "db-2": "<nil>"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hostnames (-want +got):\n%s", diff)
	}
}

func TestIPv6AndDualStackPods(t *testing.T) {
	res := runWith(t, dualStack, State{},
		svc("v6", withPolicy(*single, v6)),
		svc("dual", withPolicy(*require)),
		pod("p1", "v6", "192.168.1.1", "FD00:192:168::0A"),
		pod("p2", "dual", "192.168.1.2", "fd00:192:168::2"),
		pod("p3", "dual", "192.168.1.3"), // IPv4 only
	)
	got := map[string][]string{}
	for _, name := range []string{"v6", "dual"} {
		for _, s := range slicesOf(res, "default", name) {
			for _, ep := range s.Endpoints {
				got[name+" "+string(s.AddressType)] = append(got[name+" "+string(s.AddressType)], ep.Addresses...)
			}
		}
	}
	want := map[string][]string{
		"v6 IPv6":   {"fd00:192:168::a"},
		"dual IPv4": {"192.168.1.2", "192.168.1.3"},
		"dual IPv6": {"fd00:192:168::2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("addresses by service and type (-want +got):\n%s", diff)
	}
}

func TestZoneAndMissingNode(t *testing.T) {
	onNode := func(p *corev1.Pod, n string) *corev1.Pod { p.Spec.NodeName = n; return p }
	res := run(t, svc("web"), node("node1", "zone-a"), node("node2", ""),
		onNode(pod("a", "web", "192.168.1.1"), "node1"),
		onNode(pod("b", "web", "192.168.2.1"), "node2"),
		onNode(pod("c", "web", "192.168.3.1"), "ghost"),
		onNode(pod("d", "web", "192.168.4.1"), ""),
	)
	got := map[string]string{}
	for name, ep := range endpointsByPod(t, res, "web") {
		node, zone := "<nil>", "<nil>"
		if ep.NodeName != nil {
			node = *ep.NodeName
		}
		if ep.Zone != nil {
			zone = *ep.Zone
		}
		got[name] = node + "/" + zone
	}
	want := map[string]string{"a": "node1/zone-a", "b": "node2/<nil>", "c": "ghost/<nil>", "d": "<nil>/<nil>"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node/zone by pod (-want +got):\n%s", diff)
	}
}

func TestTrafficDistributionHints(t *testing.T) {
	for _, td := range []string{corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameNode} {
		t.Run(td, func(t *testing.T) {
			s := svc("web", func(s *corev1.Service) { s.Spec.TrafficDistribution = ptr(td) })
			res := run(t, s, node("node1", "zone-a"), pod("a", "web", "192.168.1.1"), notReady(pod("b", "web", "192.168.1.2")))
			eps := endpointsByPod(t, res, "web")
			want := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}
			if td == corev1.ServiceTrafficDistributionPreferSameNode {
				want.ForNodes = []discoveryv1.ForNode{{Name: "node1"}}
			}
			if diff := cmp.Diff(want, eps["a"].Hints); diff != "" {
				t.Errorf("hints of the ready endpoint (-want +got):\n%s", diff)
			}
			if eps["b"].Hints != nil {
				t.Errorf("a not-ready endpoint got hints %v", eps["b"].Hints)
			}
		})
	}
}

func TestWhichServicesGetSlices(t *testing.T) {
	other := pod("web-x", "web", "192.168.9.9")
	other.Namespace = "prod"
	res := run(t,
		svc("web"), pod("web-1", "web", "192.168.1.1"), other,
		svc("ext", withType(corev1.ServiceTypeExternalName), func(s *corev1.Service) { s.Spec.ExternalName = "example.com" }),
		svc("manual", noSelector),
		svc("empty", func(s *corev1.Service) { s.Spec.Selector = map[string]string{} }),
	)
	if got := endpointsByPod(t, res, "web"); len(got) != 1 || got["web-1"].TargetRef == nil {
		t.Errorf("web endpoints = %v, want only the pod of its namespace", got)
	}
	for _, name := range []string{"ext", "manual", "empty"} {
		if n := len(slicesOf(res, "default", name)); n != 0 {
			t.Errorf("%s got %d controller slices, want none", name, n)
		}
	}
}

func TestUserSlices(t *testing.T) {
	user := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "manual-1", Labels: map[string]string{discoveryv1.LabelServiceName: "manual"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3"}}},
	}
	stolen := user.DeepCopy()
	stolen.Name = "web-abcde"
	stolen.Labels = map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: controllerEndpointSlice}
	res := run(t, svc("manual", noSelector), svc("web"), user, stolen)
	got := slicesOf(res, "default", "manual")
	if len(got) != 1 || got[0].Name != "manual-1" || *got[0].Ports[0].Protocol != corev1.ProtocolTCP || *got[0].Ports[0].Name != "" {
		t.Fatalf("user slice = %+v, want it passed through with port defaults", got)
	}
	for _, s := range slicesOf(res, "default", "web") {
		if s.Name == "web-abcde" {
			t.Errorf("a user slice claiming the controller's label was kept")
		}
	}
}

func TestPodTopologyLabelsCopiedFromNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1", "other": "x"}}}
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bound", Labels: map[string]string{"topology.kubernetes.io/zone": "mine"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	unbound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unbound"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	res := Reconcile(Config{}, []Object{{Origin: "n", Obj: node}, {Origin: "a", Obj: bound}, {Origin: "b", Obj: unbound}}, State{}, time.Unix(0, 0))
	if len(res.Errors) > 0 || len(res.Pods) != 2 {
		t.Fatalf("errors %v, pods %d", res.Errors, len(res.Pods))
	}
	if got := res.Pods[0].Labels; got["topology.kubernetes.io/zone"] != "z1" || got["topology.kubernetes.io/region"] != "r1" || got["other"] != "" {
		t.Fatalf("bound pod labels = %v, want zone z1 and region r1 from its node, nothing else", got)
	}
	if len(res.Pods[1].Labels) != 0 {
		t.Fatalf("unbound pod got labels %v", res.Pods[1].Labels)
	}
	if bound.Labels["topology.kubernetes.io/zone"] != "mine" {
		t.Fatal("Reconcile modified its input")
	}
}

package kube

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/model"
)

// TestEventsInOrder: creates, updates and deletes of a Service and its slice reach
// a subscriber one by one, in order, and the store ends equal to the API.
func TestEventsInOrder(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	c, err := NewClient(env.Kubeconfig) // the --kubeconfig path, protobuf
	check(t, err)
	ctx := apiCtx(t)
	store := model.NewStore()
	sub := store.Subscribe()
	defer sub.Close()
	runSource(t, c, store, Options{})
	createNamespace(t, c, "ns1")
	check(t, errOf(c.CoreV1().Services("ns1").Create(ctx, service("ns1", "other", nil, ""), metav1.CreateOptions{})))

	key := model.ServiceKey{Namespace: "ns1", Name: "web"}
	steps := []struct {
		do   func()
		want string
	}{
		{func() {
			s := service("ns1", "web", nil, "")
			s.Annotations = map[string]string{"gen": "1"}
			check(t, errOf(c.CoreV1().Services("ns1").Create(ctx, s, metav1.CreateOptions{})))
		}, "gen=1 eps="},
		{func() {
			check(t, errOf(c.DiscoveryV1().EndpointSlices("ns1").Create(ctx, slice("ns1", "web-1", "web", nil, "10.1.0.1"), metav1.CreateOptions{})))
		}, "gen=1 eps=10.1.0.1"},
		{func() {
			s, err := c.CoreV1().Services("ns1").Get(ctx, "web", metav1.GetOptions{})
			check(t, err)
			s.Annotations["gen"] = "2"
			check(t, errOf(c.CoreV1().Services("ns1").Update(ctx, s, metav1.UpdateOptions{})))
		}, "gen=2 eps=10.1.0.1"},
		{func() {
			sl, err := c.DiscoveryV1().EndpointSlices("ns1").Get(ctx, "web-1", metav1.GetOptions{})
			check(t, err)
			sl.Endpoints[0].Addresses = []string{"10.1.0.2"}
			check(t, errOf(c.DiscoveryV1().EndpointSlices("ns1").Update(ctx, sl, metav1.UpdateOptions{})))
		}, "gen=2 eps=10.1.0.2"},
		{func() {
			if err := c.DiscoveryV1().EndpointSlices("ns1").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "gen=2 eps="},
		{func() {
			if err := c.CoreV1().Services("ns1").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "deleted"},
	}
	var seen []string
	for i, st := range steps {
		st.do()
		got, err := nextChange(sub, key, waitTimeout)
		if err != nil {
			t.Fatalf("step %d (want %q): no change of %s: %v; seen %q", i, st.want, key, err, seen)
		}
		seen = append(seen, got...)
		if len(got) != 1 || got[0] != st.want {
			t.Fatalf("step %d: changes of %s = %q, want [%q]; seen so far %q", i, key, got, st.want, seen)
		}
	}
	waitMatchesAPI(t, c, store, Options{})
	if store.Snapshot().Service(model.ServiceKey{Namespace: "ns1", Name: "other"}) == nil {
		t.Error("ns1/other missing")
	}
}

// restartTimeout bounds convergence after an apiserver restart (see the backoff
// note below).
const restartTimeout = 90 * time.Second

// TestAPIServerRestart: the store keeps its state while the apiserver is down and,
// after a graceful restart and after a kill, converges to exactly the API's state,
// including changes made right after each restart; a Service that exists throughout
// is never reported deleted.
func TestAPIServerRestart(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	c := env.Client
	ctx := apiCtx(t)
	store := model.NewStore()
	runSource(t, c, store, Options{})
	createNamespace(t, c, "r")
	for _, n := range []string{"keep", "upd", "del"} {
		check(t, errOf(c.CoreV1().Services("r").Create(ctx, service("r", n, nil, ""), metav1.CreateOptions{})))
		check(t, errOf(c.DiscoveryV1().EndpointSlices("r").Create(ctx, slice("r", n+"-1", n, nil, "10.2.0.1"), metav1.CreateOptions{})))
	}
	kubetest.CreateNode(t, c, kubetest.Node{Name: "n1", InternalIPs: []string{"172.26.236.177"}, PodCIDRs: []string{"192.168.1.0/24"}, Ready: true})
	waitMatchesAPI(t, c, store, Options{})
	sub := store.Subscribe()
	defer sub.Close()
	sub.Next() // the initial full state

	for round, stop := range []func(){env.StopAPIServer, env.KillAPIServer} {
		before := store.Snapshot()
		t0 := time.Now()
		stop()
		t.Logf("round %d: apiserver stopped in %v", round, time.Since(t0).Round(time.Millisecond))
		time.Sleep(time.Second) // informers notice and start retrying
		if d := diffSnapshots(before, store.Snapshot()); d != "" || !store.Snapshot().Synced {
			t.Fatalf("round %d: store changed while the apiserver was down (synced=%v):\n%s", round, store.Snapshot().Synced, d)
		}
		t0 = time.Now()
		env.StartAPIServer()
		t.Logf("round %d: apiserver ready again in %v", round, time.Since(t0).Round(time.Millisecond))
		t0 = time.Now()
		// Changes right after the restart: create, update, delete.
		name := []string{"new0", "new1"}[round]
		check(t, errOf(c.CoreV1().Services("r").Create(ctx, service("r", name, nil, ""), metav1.CreateOptions{})))
		check(t, errOf(c.DiscoveryV1().EndpointSlices("r").Create(ctx, slice("r", name+"-1", name, nil, "10.3.0.1"), metav1.CreateOptions{})))
		sl, err := c.DiscoveryV1().EndpointSlices("r").Get(ctx, "upd-1", metav1.GetOptions{})
		check(t, err)
		sl.Endpoints = append(sl.Endpoints, sl.Endpoints[0])
		sl.Endpoints[len(sl.Endpoints)-1].Addresses = []string{[]string{"10.2.0.2", "10.2.0.3"}[round]}
		check(t, errOf(c.DiscoveryV1().EndpointSlices("r").Update(ctx, sl, metav1.UpdateOptions{})))
		if round == 0 {
			if err := c.CoreV1().Services("r").Delete(ctx, "del", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if err := c.DiscoveryV1().EndpointSlices("r").Delete(ctx, "del-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The informers reconnect with client-go's reflector backoff (0.8s doubling
		// to 30s, jitter 1.0, reset after 2 min without errors): up to about a
		// minute after an outage, more in the second round.
		waitMatchesAPIWithin(t, c, store, Options{}, restartTimeout)
		t.Logf("round %d: store converged %v after the restart", round, time.Since(t0).Round(time.Millisecond))
	}
	_, ch := sub.Next()
	for _, sc := range ch.Services {
		if sc.Key.Name == "keep" {
			t.Errorf("r/keep changed across restarts: %s -> %s", stateString(sc.Old), stateString(sc.New))
		}
	}
	for _, nc := range ch.Nodes {
		t.Errorf("node %s changed across restarts", nc.Name)
	}
	upd := store.Snapshot().Service(model.ServiceKey{Namespace: "r", Name: "upd"})
	if got := stateString(upd); got != "gen= eps=10.2.0.1,10.2.0.2,10.2.0.3" {
		t.Errorf("r/upd = %s, want both post-restart endpoint additions", got)
	}
}

// TestServiceProxyNameAndHeadless: the proxy-name label selects Services and slices
// (unset → no label, set → equal), relabelling moves a Service between proxies, and
// headless Services are present and marked Headless.
func TestServiceProxyNameAndHeadless(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	c := env.Client
	ctx := apiCtx(t)
	def, mine := model.NewStore(), model.NewStore()
	runSource(t, c, def, Options{})
	runSource(t, c, mine, Options{ServiceProxyName: "svcnet"})
	createNamespace(t, c, "f")
	proxy := func(name string) map[string]string { return map[string]string{model.LabelServiceProxyName: name} }
	headlessLabel := map[string]string{model.LabelHeadless: ""}
	for _, s := range []*corev1.Service{
		service("f", "plain", nil, ""),
		service("f", "mine", proxy("svcnet"), ""),
		service("f", "other", proxy("other"), ""),
		service("f", "headless", nil, corev1.ClusterIPNone),
		service("f", "labelled-headless", headlessLabel, ""),
	} {
		check(t, errOf(c.CoreV1().Services("f").Create(ctx, s, metav1.CreateOptions{})))
	}
	for _, sl := range []*discoveryv1.EndpointSlice{
		slice("f", "plain-1", "plain", nil, "10.4.0.1"),
		slice("f", "mine-1", "mine", proxy("svcnet"), "10.4.0.2"),
		slice("f", "other-1", "other", proxy("other"), "10.4.0.3"),
		slice("f", "headless-1", "headless", headlessLabel, "10.4.0.4"),
	} {
		check(t, errOf(c.DiscoveryV1().EndpointSlices("f").Create(ctx, sl, metav1.CreateOptions{})))
	}
	waitMatchesAPI(t, c, def, Options{})
	waitMatchesAPI(t, c, mine, Options{ServiceProxyName: "svcnet"})
	checkNames(t, "default proxy", def, "headless", "labelled-headless", "plain")
	checkNames(t, "proxy svcnet", mine, "mine")
	snap := def.Snapshot()
	for _, n := range []string{"headless", "labelled-headless"} {
		if st := snap.Service(model.ServiceKey{Namespace: "f", Name: n}); st == nil || !st.Service.Headless {
			t.Errorf("f/%s: want present and Headless, got %+v", n, st)
		}
	}
	if st := snap.Service(model.ServiceKey{Namespace: "f", Name: "headless"}); st != nil && (len(st.Slices) != 1 || !st.Slices[0].Headless) {
		t.Errorf("f/headless: want one slice marked Headless, got %+v", st.Slices)
	}

	// Relabel plain (and its slice) to svcnet: it moves from one proxy to the other.
	s, err := c.CoreV1().Services("f").Get(ctx, "plain", metav1.GetOptions{})
	check(t, err)
	s.Labels = proxy("svcnet")
	check(t, errOf(c.CoreV1().Services("f").Update(ctx, s, metav1.UpdateOptions{})))
	sl, err := c.DiscoveryV1().EndpointSlices("f").Get(ctx, "plain-1", metav1.GetOptions{})
	check(t, err)
	sl.Labels[model.LabelServiceProxyName] = "svcnet"
	check(t, errOf(c.DiscoveryV1().EndpointSlices("f").Update(ctx, sl, metav1.UpdateOptions{})))
	waitMatchesAPI(t, c, def, Options{})
	waitMatchesAPI(t, c, mine, Options{ServiceProxyName: "svcnet"})
	checkNames(t, "default proxy after relabel", def, "headless", "labelled-headless")
	checkNames(t, "proxy svcnet after relabel", mine, "mine", "plain")
}

// checkNames compares the names of the store's Services in namespace f.
func checkNames(t *testing.T, what string, store *model.Store, want ...string) {
	t.Helper()
	var got []string
	for _, st := range store.Snapshot().Services() {
		if st.Service.Namespace == "f" {
			got = append(got, st.Service.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: services %q, want %q", what, got, want)
	}
}

// TestPodsOnlyWhenAsked: Pods reach the store only with Options.Pods; Nodes always.
// With the controller manager, a ready Pod also becomes an endpoint in the model.
func TestPodsOnlyWhenAsked(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{ControllerManager: true})
	c := env.Client
	ctx := apiCtx(t)
	without, with := model.NewStore(), model.NewStore()
	runSource(t, c, without, Options{})
	runSource(t, c, with, Options{Pods: true})
	kubetest.CreateNode(t, c, kubetest.Node{Name: "n1", InternalIPs: []string{"172.26.236.177"}, PodCIDRs: []string{"192.168.1.0/24"}, Ready: true})
	createNamespace(t, c, "p")
	createPod(t, c, "p", "web", "n1")
	kubetest.SetPodStatus(t, c, "p", "web", true, "192.168.1.10")
	svc := service("p", "web", nil, "")
	svc.Spec.Selector = map[string]string{"app": "web"}
	svc.Spec.Ports[0].TargetPort = intstr.FromString("http")
	check(t, errOf(c.CoreV1().Services("p").Create(ctx, svc, metav1.CreateOptions{})))

	waitStore(t, with, "pod p/web ready with its IP", func(s *model.Snapshot) (bool, string) {
		p := s.Pod(model.PodKey{Namespace: "p", Name: "web"})
		if p == nil || !p.Ready || len(p.IPs) != 1 || p.IPs[0].String() != "192.168.1.10" || p.NodeName != "n1" {
			return false, "pod: " + stateOfPod(p)
		}
		return true, ""
	})
	waitStore(t, without, "endpoint of p/web from the controller", func(s *model.Snapshot) (bool, string) {
		st := s.Service(model.ServiceKey{Namespace: "p", Name: "web"})
		if st == nil {
			return false, "no service"
		}
		eps := st.Endpoints(st.Service.Ports[0])
		if len(eps) != 1 || eps[0].Addr.String() != "192.168.1.10" || eps[0].Port != 8080 || !eps[0].Endpoint.Ready {
			return false, stateString(st)
		}
		return true, ""
	})
	waitMatchesAPI(t, c, with, Options{Pods: true})
	waitMatchesAPI(t, c, without, Options{})
	if n := len(without.Snapshot().Pods()); n != 0 {
		t.Errorf("store without Pods option holds %d pods", n)
	}
	for _, s := range []*model.Store{with, without} {
		n := s.Snapshot().Node("n1")
		if n == nil || !n.Ready || len(n.PodCIDRs) != 1 || n.PodCIDRs[0].String() != "192.168.1.0/24" {
			t.Errorf("node n1 = %+v", n)
		}
	}
	if err := c.CoreV1().Pods("p").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitMatchesAPI(t, c, with, Options{Pods: true})
}

func createPod(t *testing.T, c kubernetes.Interface, ns, name, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Image: "none", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
	check(t, errOf(c.CoreV1().Pods(ns).Create(apiCtx(t), pod, metav1.CreateOptions{})))
}

func stateOfPod(p *model.Pod) string {
	if p == nil {
		return "absent"
	}
	return p.Namespace + "/" + p.Name + " node=" + p.NodeName + " phase=" + p.Phase
}

// TestUnrepresentedSlicesDoNotBlock: FQDN slices and slices without the
// service-name label are left out without holding back the others; a slice that
// loses its label leaves the store (no stale state); one that changes Service moves.
func TestUnrepresentedSlicesDoNotBlock(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	c := env.Client
	ctx := apiCtx(t)
	store := model.NewStore()
	runSource(t, c, store, Options{})
	createNamespace(t, c, "x")
	check(t, errOf(c.CoreV1().Services("x").Create(ctx, service("x", "a", nil, ""), metav1.CreateOptions{})))
	check(t, errOf(c.CoreV1().Services("x").Create(ctx, service("x", "b", nil, ""), metav1.CreateOptions{})))
	fqdn := slice("x", "a-fqdn", "a", nil)
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	fqdn.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"example.com"}}}
	for _, sl := range []*discoveryv1.EndpointSlice{
		fqdn,
		slice("x", "nolabel", "", nil, "10.5.0.9"),
		slice("x", "a-1", "a", nil, "10.5.0.1"),
		slice("x", "a-2", "a", nil, "10.5.0.2"),
	} {
		check(t, errOf(c.DiscoveryV1().EndpointSlices("x").Create(ctx, sl, metav1.CreateOptions{})))
	}
	waitMatchesAPI(t, c, store, Options{})
	checkSlices(t, store, "a", "a-1", "a-2")

	// a-1 loses its service-name label: it must leave the store, not stay stale.
	sl, err := c.DiscoveryV1().EndpointSlices("x").Get(ctx, "a-1", metav1.GetOptions{})
	check(t, err)
	delete(sl.Labels, discoveryv1.LabelServiceName)
	check(t, errOf(c.DiscoveryV1().EndpointSlices("x").Update(ctx, sl, metav1.UpdateOptions{})))
	// a-2 moves to Service b.
	sl, err = c.DiscoveryV1().EndpointSlices("x").Get(ctx, "a-2", metav1.GetOptions{})
	check(t, err)
	sl.Labels[discoveryv1.LabelServiceName] = "b"
	check(t, errOf(c.DiscoveryV1().EndpointSlices("x").Update(ctx, sl, metav1.UpdateOptions{})))
	// A later valid slice still arrives.
	check(t, errOf(c.DiscoveryV1().EndpointSlices("x").Create(ctx, slice("x", "a-3", "a", nil, "10.5.0.3"), metav1.CreateOptions{})))
	waitMatchesAPI(t, c, store, Options{})
	checkSlices(t, store, "a", "a-3")
	checkSlices(t, store, "b", "a-2")
}

func checkSlices(t *testing.T, store *model.Store, svc string, want ...string) {
	t.Helper()
	st := store.Snapshot().Service(model.ServiceKey{Namespace: "x", Name: svc})
	if st == nil {
		t.Fatalf("x/%s missing", svc)
	}
	var got []string
	for _, sl := range st.Slices {
		got = append(got, sl.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("x/%s slices %q, want %q", svc, got, want)
	}
}

package kube

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/model"
)

// waitTimeout bounds every wait for the store to reach a state.
const waitTimeout = 30 * time.Second

// runSource runs a Source on store until the test ends; cleanup cancels it and
// checks that Run returns nil within a bounded time.
func runSource(t *testing.T, c kubernetes.Interface, store *model.Store, opts Options) {
	t.Helper()
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = waitTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(c, store, opts).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return within 10s of cancel")
		}
	})
	kubetest.Eventually(t, waitTimeout, "source synced", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("Run returned before sync: %v", err)
		default:
		}
		return store.Snapshot().Synced, "store not synced"
	})
}

// apiSnapshot converts what the API holds now, selected as the Source selects it,
// into a snapshot: what the store must converge to. Objects that do not convert
// are left out, as the Source leaves them out.
func apiSnapshot(ctx context.Context, c kubernetes.Interface, opts Options) (*model.Snapshot, error) {
	sel := metav1.ListOptions{LabelSelector: ServiceSelector(opts.ServiceProxyName).String()}
	svcs, err := c.CoreV1().Services("").List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	sls, err := c.DiscoveryV1().EndpointSlices("").List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list endpointslices: %w", err)
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var pods *corev1.PodList
	if opts.Pods {
		if pods, err = c.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
	}
	var (
		ms []*model.Service
		me []*model.EndpointSlice
		mn []*model.Node
		mp []*model.Pod
	)
	for i := range svcs.Items {
		if s, err := model.ServiceFromAPI(&svcs.Items[i]); err == nil {
			ms = append(ms, s)
		}
	}
	for i := range sls.Items {
		if s, ok, err := model.EndpointSliceFromAPI(&sls.Items[i]); err == nil && ok {
			me = append(me, s)
		}
	}
	for i := range nodes.Items {
		if n, err := model.NodeFromAPI(&nodes.Items[i]); err == nil {
			mn = append(mn, n)
		}
	}
	if pods != nil {
		for i := range pods.Items {
			if p, err := model.PodFromAPI(&pods.Items[i]); err == nil {
				mp = append(mp, p)
			}
		}
	}
	st := model.NewStore()
	st.Update(func(tx *model.Txn) { tx.Replace(ms, me, mn, mp) })
	return st.Snapshot(), nil
}

var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// diffSnapshots returns "" when got holds exactly want's objects, else a diff. It
// also reports a slice listed twice.
func diffSnapshots(want, got *model.Snapshot) string {
	var b strings.Builder
	if d := cmp.Diff(want.Services(), got.Services(), cmpOpts); d != "" {
		fmt.Fprintf(&b, "services (-api +store):\n%s", d)
	}
	if d := cmp.Diff(want.EndpointSlices(), got.EndpointSlices(), cmpOpts); d != "" {
		fmt.Fprintf(&b, "endpointslices (-api +store):\n%s", d)
	}
	if d := cmp.Diff(want.Nodes(), got.Nodes(), cmpOpts); d != "" {
		fmt.Fprintf(&b, "nodes (-api +store):\n%s", d)
	}
	if d := cmp.Diff(want.Pods(), got.Pods(), cmpOpts); d != "" {
		fmt.Fprintf(&b, "pods (-api +store):\n%s", d)
	}
	seen := map[string]bool{}
	for _, st := range got.Services() {
		for _, sl := range st.Slices {
			k := sl.Namespace + "/" + sl.Name
			if seen[k] {
				fmt.Fprintf(&b, "slice %s listed twice\n", k)
			}
			seen[k] = true
		}
	}
	return b.String()
}

// waitMatchesAPI waits until the store holds exactly what the API holds.
func waitMatchesAPI(t *testing.T, c kubernetes.Interface, store *model.Store, opts Options) {
	t.Helper()
	waitMatchesAPIWithin(t, c, store, opts, waitTimeout)
}

func waitMatchesAPIWithin(t *testing.T, c kubernetes.Interface, store *model.Store, opts Options, timeout time.Duration) {
	t.Helper()
	kubetest.Eventually(t, timeout, "store to match the API", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		want, err := apiSnapshot(ctx, c, opts)
		if err != nil {
			return false, err.Error()
		}
		d := diffSnapshots(want, store.Snapshot())
		return d == "", d
	})
}

// waitStore waits until cond holds on the store's snapshot.
func waitStore(t *testing.T, store *model.Store, what string, cond func(*model.Snapshot) (bool, string)) {
	t.Helper()
	kubetest.Eventually(t, waitTimeout, what, func() (bool, string) { return cond(store.Snapshot()) })
}

// apiCtx returns a context bounding the API calls of one test.
func apiCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// errOf drops a call's value: check(t, errOf(c.Create(...))).
func errOf(_ any, err error) error { return err }

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func service(ns, name string, lbls map[string]string, clusterIP string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: corev1.ServiceSpec{
			ClusterIP: clusterIP,
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// slice returns an IPv4 slice for service svc ("" for no service-name label)
// holding one ready endpoint per address, on port http/8080.
func slice(ns, name, svc string, lbls map[string]string, addrs ...string) *discoveryv1.EndpointSlice {
	l := map[string]string{}
	for k, v := range lbls {
		l[k] = v
	}
	if svc != "" {
		l[discoveryv1.LabelServiceName] = svc
	}
	port, pname, proto, ready := int32(8080), "http", corev1.ProtocolTCP, true
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}},
	}
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	return sl
}

func createNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	kubetest.CreateNamespace(t, c, name)
}

// stateString describes a Service's state for order checks: "deleted", or its
// "gen" annotation and the endpoint addresses of its slices.
func stateString(st *model.ServiceState) string {
	if st == nil {
		return "deleted"
	}
	var addrs []string
	for _, sl := range st.Slices {
		for _, ep := range sl.Endpoints {
			for _, a := range ep.Addresses {
				addrs = append(addrs, a.String())
			}
		}
	}
	return fmt.Sprintf("gen=%s eps=%s", st.Service.Annotations["gen"], strings.Join(addrs, ","))
}

var errTimeout = errors.New("timeout")

// nextChange waits (bounded) for the subscription to report a change of key and
// returns the new state's description.
func nextChange(sub *model.Subscription, key model.ServiceKey, timeout time.Duration) ([]string, error) {
	deadline := time.After(timeout)
	for {
		select {
		case <-sub.C():
			_, ch := sub.Next()
			var out []string
			for _, c := range ch.Services {
				if c.Key == key {
					out = append(out, stateString(c.New))
				}
			}
			if len(out) > 0 {
				return out, nil
			}
		case <-deadline:
			return nil, errTimeout
		}
	}
}

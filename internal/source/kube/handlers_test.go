package kube

import (
	"context"
	"errors"
	"os"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/model"
)

// Unit tests of the handler logic, without an apiserver.

func key(ns, name string) model.ServiceKey { return model.ServiceKey{Namespace: ns, Name: name} }

// TestConversionErrorLeavesObjectOut: a Service the model cannot convert is left
// out without affecting others, and an update that makes a good Service bad
// removes its previous version.
func TestConversionErrorLeavesObjectOut(t *testing.T) {
	s := New(nil, model.NewStore(), Options{})
	h := s.serviceHandler()
	good, bad := service("ns", "good", nil, "10.96.0.5"), service("ns", "bad", nil, "not-an-ip")
	good.ResourceVersion, bad.ResourceVersion = "1", "1"
	h.OnAdd(good, true)
	h.OnAdd(bad, true)
	s.flush(true)
	snap := s.store.Snapshot()
	if snap.Service(key("ns", "good")) == nil || snap.Service(key("ns", "bad")) != nil || !snap.Synced {
		t.Fatalf("after add: good=%v bad=%v synced=%v", snap.Service(key("ns", "good")), snap.Service(key("ns", "bad")), snap.Synced)
	}
	worse := good.DeepCopy()
	worse.ResourceVersion = "2"
	worse.Spec.ExternalIPs = []string{"nope"}
	h.OnUpdate(good, worse)
	s.flush(false)
	if s.store.Snapshot().Service(key("ns", "good")) != nil {
		t.Fatal("a Service that stopped converting kept its previous version")
	}
}

// TestTombstoneAndUnchangedUpdate: a DeletedFinalStateUnknown deletes by key, and
// an update with an unchanged resourceVersion publishes nothing.
func TestTombstoneAndUnchangedUpdate(t *testing.T) {
	s := New(nil, model.NewStore(), Options{})
	eh := s.sliceHandler()
	svc := service("ns", "a", nil, "10.96.0.7")
	svc.ResourceVersion = "5"
	sl := slice("ns", "a-1", "a", nil, "10.0.0.1")
	sl.ResourceVersion = "6"
	s.serviceHandler().OnAdd(svc, true)
	eh.OnAdd(sl, true)
	s.flush(true)
	rev := s.store.Snapshot().Revision
	if st := s.store.Snapshot().Service(key("ns", "a")); st == nil || len(st.Slices) != 1 {
		t.Fatalf("state = %+v", st)
	}
	eh.OnUpdate(sl, sl.DeepCopy())
	s.flush(false)
	if got := s.store.Snapshot().Revision; got != rev {
		t.Errorf("unchanged update published revision %d (was %d)", got, rev)
	}
	eh.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/a-1", Obj: "garbage of another type"})
	s.serviceHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/a"})
	s.flush(false)
	snap := s.store.Snapshot()
	if snap.Service(key("ns", "a")) != nil || len(snap.EndpointSlices()) != 0 {
		t.Errorf("after tombstones: service %v, slices %v", snap.Service(key("ns", "a")), snap.EndpointSlices())
	}
}

// TestRunWithFakeClientset runs the whole Source against client-go's fake
// clientset: initial objects land in one synced snapshot, unrepresented and bad
// objects are left out, and a later change arrives.
func TestRunWithFakeClientset(t *testing.T) {
	fqdn := slice("ns", "fqdn", "good", nil)
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	c := fake.NewClientset(
		service("ns", "good", nil, "10.96.0.5"),
		service("ns", "bad", nil, "not-an-ip"),
		slice("ns", "good-1", "good", nil, "10.0.0.1"),
		fqdn,
		slice("ns", "orphan", "", nil, "10.0.0.2"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"192.168.1.0/24"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}},
	)
	store := model.NewStore()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(c, store, Options{SyncTimeout: 10 * time.Second}).Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitStore(t, store, "synced", func(s *model.Snapshot) (bool, string) { return s.Synced, "not synced" })
	snap := store.Snapshot()
	if snap.Revision != 1 {
		t.Errorf("initial state published as revision %d, want one snapshot (1)", snap.Revision)
	}
	if got := len(snap.Services()); got != 1 || snap.Service(key("ns", "good")) == nil {
		t.Errorf("services = %d, want only ns/good", got)
	}
	if got := snap.EndpointSlices(); len(got) != 1 || got[0].Name != "good-1" {
		t.Errorf("slices = %+v, want only good-1", got)
	}
	if snap.Node("n1") == nil || len(snap.Pods()) != 0 {
		t.Errorf("node n1 = %v, pods = %d (want node, no pods)", snap.Node("n1"), len(snap.Pods()))
	}
	if _, err := c.CoreV1().Services("ns").Create(ctx, service("ns", "later", nil, "10.96.0.6"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStore(t, store, "ns/later", func(s *model.Snapshot) (bool, string) {
		return s.Service(key("ns", "later")) != nil, "absent"
	})
}

// TestRunNotSynced: Run reports ErrNotSynced when the lists never succeed
// (in a synctest bubble: the sync timeout passes without real waiting).
func TestRunNotSynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := fake.NewClientset()
		c.PrependReactor("list", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("forbidden for the test")
		})
		err := New(c, model.NewStore(), Options{SyncTimeout: 300 * time.Millisecond}).Run(context.Background())
		if !errors.Is(err, ErrNotSynced) {
			t.Fatalf("Run = %v, want ErrNotSynced", err)
		}
	})
}

func TestServiceSelector(t *testing.T) {
	if got, want := ServiceSelector("").String(), "!service.kubernetes.io/service-proxy-name"; got != want {
		t.Errorf("selector(\"\") = %q, want %q", got, want)
	}
	if got, want := ServiceSelector("svcnet").String(), "service.kubernetes.io/service-proxy-name=svcnet"; got != want {
		t.Errorf("selector(svcnet) = %q, want %q", got, want)
	}
	if err := New(fake.NewClientset(), model.NewStore(), Options{ServiceProxyName: "bad name!"}).Run(context.Background()); err == nil {
		t.Error("Run accepted an invalid proxy name")
	}
}

func TestRESTConfigFromKubeconfigEnv(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	dir := t.TempDir()
	path := dir + "/kc"
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: tok}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	cfg, err := RESTConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:1" || cfg.BearerToken != "tok" {
		t.Errorf("config from $KUBECONFIG: host %q token %q", cfg.Host, cfg.BearerToken)
	}
	if _, err := RESTConfig(dir + "/missing"); err == nil {
		t.Error("missing explicit kubeconfig accepted")
	}
}

// TestSliceBeforeItsService: informers deliver Services and EndpointSlices
// independently, so a slice can be flushed before its Service, and a Service can
// be deleted in one flush and its slice in a later one. Neither may lose or keep a
// slice. (Fails while model.Txn.commit drops transactions whose only effect is on
// slices of a not-yet-known or deleted Service.)
func TestSliceBeforeItsService(t *testing.T) {
	s := New(nil, model.NewStore(), Options{})
	s.flush(true) // synced, empty
	sl := slice("ns", "a-1", "a", nil, "10.0.0.1")
	s.sliceHandler().OnAdd(sl, false)
	s.flush(false)
	s.serviceHandler().OnAdd(service("ns", "a", nil, "10.96.0.7"), false)
	s.flush(false)
	st := s.store.Snapshot().Service(key("ns", "a"))
	if st == nil || len(st.Slices) != 1 {
		t.Fatalf("slice flushed before its Service was lost: state %+v", st)
	}
	s.serviceHandler().OnDelete(service("ns", "a", nil, "10.96.0.7"))
	s.flush(false)
	s.sliceHandler().OnDelete(sl)
	s.flush(false)
	if got := s.store.Snapshot().EndpointSlices(); len(got) != 0 {
		t.Fatalf("slice deleted after its Service stayed in the store: %+v", got)
	}
}

// TestConvertedKeepsSlimMetadata: what the informers cache is keyed, compared
// and deep-copied by its namespace, name and resourceVersion alone, through
// meta.Accessor as client-go does, and stays under a hundred bytes.
func TestConvertedKeepsSlimMetadata(t *testing.T) {
	svc := service("ns", "a", map[string]string{"app": "a"}, "10.96.0.7")
	svc.ResourceVersion, svc.UID = "7", "uid-a"
	obj, err := transform(svc)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := obj.(*converted)
	if !ok || c.obj == nil {
		t.Fatalf("transform = %T %+v, want a converted Service", obj, obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("meta.Accessor: %v", err)
	}
	if m.GetNamespace() != "ns" || m.GetName() != "a" || m.GetResourceVersion() != "7" || m.GetUID() != "" || m.GetLabels() != nil {
		t.Errorf("metadata %q %q %q %q %v, want ns a 7 and nothing else", m.GetNamespace(), m.GetName(), m.GetResourceVersion(), m.GetUID(), m.GetLabels())
	}
	if k, err := cache.MetaNamespaceKeyFunc(obj); err != nil || k != "ns/a" {
		t.Errorf("key = %q, %v; want ns/a", k, err)
	}
	cp := c.DeepCopyObject().(*converted)
	if cp == c || cp.slimMeta != c.slimMeta || cp.obj != c.obj {
		t.Errorf("deep copy %+v of %+v", cp, c)
	}
	if again, _ := transform(obj); again != obj {
		t.Error("transform converted a converted object again")
	}
	if size := unsafe.Sizeof(converted{}); size > 96 {
		t.Errorf("converted is %d bytes: every cached Service and EndpointSlice pays it", size)
	}
}

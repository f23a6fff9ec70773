package main

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// heapPerServiceBudget bounds the proxy's live heap per Service of the sync
// benchmark's kind (1 TCP port, 1 EndpointSlice of 2 ready endpoints): the
// informer caches, the model store and the service table, less the kernel's
// share. Measured 2.9 KB at 10k Services (4.5 KB before the informer caches
// kept slim metadata, slices dropped their labels, and the service table and
// its assembler stopped keeping copies and oversized slices); the budget
// leaves a margin for the runtime's map growth steps. At 10k Services,
// bench-sync's RSS target (100 MiB) holds about 30 MB of live heap.
const heapPerServiceBudget = 3500

// TestProxyHeapPerService runs the kube source and the proxier of svcnet proxy
// (over client-go's fake clientset and a kernel that keeps nothing) at 2,000
// Services and checks the live heap they hold after the first full sync and
// after a few changes.
func TestProxyHeapPerService(t *testing.T) {
	if testing.Short() {
		t.Skip("heap measurement: seconds")
	}
	const n = 2000
	objs := []k8sruntime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.26.236.177"}}}}}
	for i := range n {
		objs = append(objs, benchService(i), benchSlice(i))
	}
	c := fake.NewClientset(objs...)
	c.PrependReactor("list", "*", freshStrings(c))
	objs = nil
	base := liveHeap()

	store := model.NewStore()
	synced := make(chan proxy.SyncResult, 16)
	p, err := proxy.New(proxy.Config{NodeName: "node1", Families: []ipfamily.Family{ipfamily.IPv4}, MinSyncPeriod: time.Millisecond},
		proxy.Deps{Store: store, DataPlane: nftables.New(discardConn{}, ipfamily.IPv4), Logger: klog.Background(),
			InterfaceAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("172.26.236.177")}, nil },
			OnSync:         func(r proxy.SyncResult) { synced <- r }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	defer func() {
		cancel()
		<-done
		<-done
	}()
	go func() { _ = kube.New(c, store, kube.Options{Logger: klog.Background()}).Run(ctx); done <- struct{}{} }()
	go func() { _ = p.Run(ctx); done <- struct{}{} }()
	wait := func(what string) {
		t.Helper()
		select {
		case r := <-synced:
			if r.Err != nil {
				t.Fatalf("%s: %v", what, r.Err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no sync within 30s", what)
		}
	}
	wait("full sync")
	check := func(what string) {
		t.Helper()
		per := float64(liveHeap()-base) / n
		t.Logf("%s: %.0f bytes of live heap per Service", what, per)
		if per > heapPerServiceBudget {
			t.Errorf("%s: %.0f bytes of live heap per Service, budget %d", what, per, heapPerServiceBudget)
		}
	}
	check("after the full sync")
	for i := range 10 {
		if _, err := c.DiscoveryV1().EndpointSlices("bench").Create(ctx, benchSlice(n+i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Services("bench").Create(ctx, benchService(n+i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wait("change " + strconv.Itoa(i))
	}
	check("after 10 changes")
}

// liveHeap returns the heap in use after two collections (the second frees
// what the first left to finalizers and sweeping).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// discardConn is a kernel that accepts every transaction and keeps nothing.
type discardConn struct{}

func (discardConn) Apply(context.Context, ...*nft.Tx) error                   { return nil }
func (discardConn) Tables(context.Context, ipfamily.Family) ([]string, error) { return nil, nil }
func (discardConn) Read(context.Context, ipfamily.Family, string) (*nft.Table, error) {
	return nil, nft.ErrNoTable
}
func (discardConn) Generation(context.Context) (uint32, error) { return 0, nil }

// benchService is the i-th Service as the apiserver returns bench-sync's:
// selector-less ClusterIP, one TCP port.
func benchService(i int) *corev1.Service {
	ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&255, i&255)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i), ResourceVersion: strconv.Itoa(1000 + 2*i),
			UID: types.UID(fmt.Sprintf("0b9a8f2e-5a3c-4d6e-9f10-%012d", i)), CreationTimestamp: metav1.Now()},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack),
			SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// benchSlice is the EndpointSlice of benchService(i): 2 ready endpoints on
// another node.
func benchSlice(i int) *discoveryv1.EndpointSlice {
	svc := fmt.Sprintf("svc-%05d", i)
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: svc + "-bench", ResourceVersion: strconv.Itoa(1001 + 2*i),
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "svcnet-bench"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for k := range 2 {
		n := 2*i + k
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{netip.AddrFrom4([4]byte{192, 168, byte(n / 254), byte(n%254 + 1)}).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To("node2"),
		})
	}
	return es
}

// freshStrings makes lists return objects with strings of their own, as a
// protobuf decode does (the fake's deep copies share the tracker's strings,
// which the baseline counts).
func freshStrings(c *fake.Clientset) clienttesting.ReactionFunc {
	react := clienttesting.ObjectReaction(c.Tracker())
	return func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		ok, obj, err := react(a)
		if err != nil || !ok {
			return ok, obj, err
		}
		switch l := obj.(type) {
		case *corev1.ServiceList:
			for i := range l.Items {
				l.Items[i] = *roundTrip(&l.Items[i], &corev1.Service{})
			}
		case *discoveryv1.EndpointSliceList:
			for i := range l.Items {
				l.Items[i] = *roundTrip(&l.Items[i], &discoveryv1.EndpointSlice{})
			}
		}
		return ok, obj, err
	}
}

// roundTrip returns a decoded copy of in's protobuf encoding, in out.
func roundTrip[T interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}](in, out T) T {
	b, err := in.Marshal()
	if err == nil {
		err = out.Unmarshal(b)
	}
	if err != nil {
		panic(fmt.Sprintf("protobuf round trip: %v", err))
	}
	return out
}

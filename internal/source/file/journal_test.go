package file

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/logtest"
	"github.com/svcnet/svcnet/internal/model"
)

// cluster is a set of objects a control plane publishes, by name.
type cluster map[string]runtime.Object

func jService(name string, port int32, labels map[string]string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.ServiceSpec{Selector: selector,
			Ports: []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
}

func jPod(name, app, ip string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func jSlice(name, service string, ips ...string) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return sl
}

func jNode(name string, ready bool) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.26.236.10"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

// publisher publishes clusters as the lab's control plane does: the
// objects as given, with the Services as it allocated them.
type publisher struct {
	t     testing.TB
	path  string
	pub   *Publisher
	rec   controlplane.Reconciler
	state controlplane.State
	cfg   controlplane.Config
}

func (p *publisher) publish(c cluster) {
	p.t.Helper()
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	slices.Sort(names)
	objs := make([]controlplane.Object, 0, len(c))
	for _, n := range names {
		objs = append(objs, controlplane.Object{Origin: "objects/" + n + ".yaml", Obj: c[n]})
	}
	res := p.rec.Reconcile(p.cfg, objs, p.state, time.Unix(1700000000, 0))
	p.state = res.State
	resolved := map[string]*corev1.Service{}
	for _, s := range res.Services {
		resolved[s.Name] = s
	}
	docs := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		obj := o.Obj
		if s, ok := obj.(*corev1.Service); ok && resolved[s.Name] != nil {
			obj = resolved[s.Name]
		}
		docs = append(docs, obj)
	}
	if err := p.pub.Publish(docs, res, EncodeJSON); err != nil {
		p.t.Fatal(err)
	}
}

// sameStores reports how two snapshots differ ("" when they do not).
func sameStores(a, b *model.Snapshot) string {
	as, bs := a.Services(), b.Services()
	if len(as) != len(bs) {
		return fmt.Sprintf("%d Services, want %d", len(as), len(bs))
	}
	for i := range as {
		if !as[i].Equal(bs[i]) {
			return fmt.Sprintf("Service %v: %+v %+v, want %+v %+v", bs[i].Service.Key(), as[i], as[i].Service, bs[i], bs[i].Service)
		}
	}
	ae, be := a.EndpointSlices(), b.EndpointSlices()
	if len(ae) != len(be) {
		return fmt.Sprintf("%d slices, want %d", len(ae), len(be))
	}
	for i := range ae {
		if !ae[i].Equal(be[i]) {
			return fmt.Sprintf("slice %s: %+v, want %+v", be[i].Name, ae[i], be[i])
		}
	}
	if !reflect.DeepEqual(a.Nodes(), b.Nodes()) {
		return fmt.Sprintf("nodes %+v, want %+v", a.Nodes(), b.Nodes())
	}
	if !reflect.DeepEqual(a.Pods(), b.Pods()) {
		return fmt.Sprintf("pods %+v, want %+v", a.Pods(), b.Pods())
	}
	return ""
}

// TestJournalFollowedAsReadWhole: a reader of a publication that takes
// each change from the journal holds, after every change, what a reader of
// the whole publication holds; it reads the publication whole only when
// the publisher started a journal without prev (a first publication, one
// by a publisher that remembers nothing, a bulk change).
func TestJournalFollowedAsReadWhole(t *testing.T) {
	for _, proxyName := range []string{"", "other"} {
		t.Run("proxy="+proxyName, func(t *testing.T) { followedAsReadWhole(t, proxyName) })
	}
}

func followedAsReadWhole(t *testing.T, proxyName string) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	cfg := controlplane.Config{}
	p := &publisher{t: t, path: path, pub: NewPublisher(path, true), cfg: cfg}
	p.pub.minSize = 16 << 10 // journals start again often
	c := cluster{"node1": jNode("node1", true)}
	for i := range 6 {
		name := fmt.Sprintf("svc%d", i)
		c["svc-"+name] = jService(name, 80, nil, map[string]string{"app": fmt.Sprintf("web%d", i%3)})
		c["pod-"+name] = jPod("pod-"+name, fmt.Sprintf("web%d", i%3), fmt.Sprintf("10.244.1.%d", 10+i))
	}
	c["svc-manual"] = jService("manual", 81, nil, nil)
	c["slice-manual"] = jSlice("manual-1", "manual", "10.244.2.1")
	c["pool-lab"] = decodeDocument("pool", []byte(labPool)).objs[0].Obj
	p.publish(c)

	sink := &logtest.Sink{}
	store := model.NewStore()
	opts := Options{Path: path, Config: cfg, ServiceProxyName: proxyName}
	src := New(opts, store, sink.Logger(2))
	var bg sync.WaitGroup
	defer bg.Wait()
	ctx := context.Background()
	if err := src.reload(ctx, &bg, true); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	wholeWant := 1 // reads of the whole publication expected
	journals := map[string]bool{}
	labels := []map[string]string{nil, {model.LabelServiceProxyName: "other"}, {"tier": "x"}}
	for step := range 150 {
		what := ""
		switch k := rng.IntN(13); {
		case step == 60:
			what = "a publisher that remembers nothing"
			p.pub = NewPublisher(path, true)
			p.pub.minSize = 16 << 10
			c["svc-fresh"] = jService("fresh", 90, nil, nil)
			wholeWant++
		case step == 80:
			// This one's memory is stale: it starts a journal.
			what = "another publisher between two of this one's"
			c["svc-other"] = jService("other", 91, nil, nil)
			other := &publisher{t: t, path: path, pub: NewPublisher(path, false), cfg: cfg, state: p.state}
			other.publish(c)
			c["svc-again"] = jService("again", 92, nil, nil)
			wholeWant++
		case step == 100:
			what = "a bulk change"
			for n, o := range c {
				switch o := o.(type) {
				case *corev1.Service:
					o = o.DeepCopy()
					o.Spec.Ports[0].Port++
					c[n] = o
				case *corev1.Pod:
					o = o.DeepCopy()
					o.Labels["tier"] = "bulk"
					c[n] = o
				}
			}
			wholeWant++
		case k < 2:
			name := fmt.Sprintf("svc%d", rng.IntN(12))
			what = "add or change Service " + name
			c["svc-"+name] = jService(name, int32(80+rng.IntN(3)), labels[rng.IntN(len(labels))], map[string]string{"app": fmt.Sprintf("web%d", rng.IntN(3))})
		case k < 4:
			name := fmt.Sprintf("svc%d", rng.IntN(12))
			what = "delete Service " + name
			delete(c, "svc-"+name)
		case k < 6:
			name := fmt.Sprintf("pod%d", rng.IntN(12))
			what = "add or change Pod " + name
			c["pod-"+name] = jPod(name, fmt.Sprintf("web%d", rng.IntN(3)), fmt.Sprintf("10.244.1.%d", 100+rng.IntN(12)))
		case k == 6:
			name := fmt.Sprintf("pod%d", rng.IntN(12))
			what = "delete Pod " + name
			delete(c, "pod-"+name)
		case k == 7:
			svc := []string{"manual", "svc1", "gone"}[rng.IntN(3)]
			what = "move or change the manual slice to " + svc
			c["slice-manual"] = jSlice("manual-1", svc, fmt.Sprintf("10.244.2.%d", rng.IntN(5)))
		case k == 8:
			what = "relabel the manual Service"
			c["svc-manual"] = jService("manual", 81, labels[rng.IntN(len(labels))], nil)
		case k == 9:
			what = "an invalid Service"
			c["svc-bad"] = jService("bad", int32(rng.IntN(2)), nil, nil) // port 0 is invalid
		case k == 11:
			what = "add or change the LoadBalancer Service"
			lb := jService("lb", 80, nil, map[string]string{"app": fmt.Sprintf("web%d", rng.IntN(3))})
			lb.Spec.Type = corev1.ServiceTypeLoadBalancer
			lb.Spec.ExternalTrafficPolicy = []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}[rng.IntN(2)]
			c["svc-lb"] = lb
		case k == 10:
			name := fmt.Sprintf("node%d", 1+rng.IntN(2))
			what = "add or change Node " + name
			c["node-"+name] = jNode(name, rng.IntN(2) == 0)
		default:
			what = "no change"
		}
		p.publish(c)
		if h, ok, _, err := readPublicationHeader(path); err != nil || !ok {
			t.Fatalf("step %d: publication header: %v %v", step, ok, err)
		} else {
			journals[h.Journal] = true
		}
		if !src.followJournal() {
			if err := src.reload(ctx, &bg, false); err != nil {
				t.Fatalf("step %d (%s): %v", step, what, err)
			}
		}
		whole := model.NewStore()
		l, err := Load(Options{Path: path, Config: cfg, ServiceProxyName: proxyName, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		l.apply(whole)
		if d := sameStores(store.Snapshot(), whole.Snapshot()); d != "" {
			t.Fatalf("step %d (%s): the follower's store differs from a whole read: %s", step, what, d)
		}
	}
	if lb := store.Snapshot().Service(model.ServiceKey{Namespace: "default", Name: "lb"}); proxyName == "" && (lb == nil || len(lb.Service.LoadBalancerIngress) == 0) {
		t.Errorf("the LoadBalancer Service: %+v, want one with an IP from the pool", lb)
	}
	if n := sink.Count("Loaded manifests"); n != wholeWant {
		t.Errorf("read the publication whole %d times, want %d", n, wholeWant)
	}
	if n := sink.Count("Followed the publication's journal"); n < 140 {
		t.Errorf("followed the journal %d times, want at least 140", n)
	}
	t.Logf("%d journals, %d whole reads", len(journals), wholeWant)
	if len(journals) <= wholeWant {
		t.Errorf("%d journals for %d whole reads: none started again after growing", len(journals), wholeWant)
	}
}

// TestFollowerReadsWhole: a reader reads the publication whole when the
// journal does not continue what it holds, and waits for a record being
// written.
func TestFollowerReadsWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	p := &publisher{t: t, path: path, pub: NewPublisher(path, true)}
	c := cluster{"svc-a": jService("a", 80, nil, nil)}
	p.publish(c)
	store := model.NewStore()
	f := newFollower(path, Options{}, klog.Background())
	l, err := Load(Options{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	l.apply(store)
	h, ok, id, err := readPublicationHeader(path)
	if err != nil || !ok {
		t.Fatalf("header: %v %v", ok, err)
	}
	f.reset(h, id, l.API)
	if !f.following() {
		t.Fatal("not following a fresh journal")
	}
	jpath := JournalPathFor(path)

	// A record being written is read once whole.
	svcB, err := EncodeJSON(jService("b", 80, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := json.Marshal(journalRecord{Seq: h.Seq + 1, Put: []json.RawMessage{svcB}})
	if err != nil {
		t.Fatal(err)
	}
	rec = append(rec, '\n')
	if err := appendFile(jpath, rec[:len(rec)/2]); err != nil {
		t.Fatal(err)
	}
	if n, ok := f.catchUp(store); !ok || n != 0 {
		t.Fatalf("half a record: %d records, ok %v; want 0, true", n, ok)
	}
	if err := appendFile(jpath, rec[len(rec)/2:]); err != nil {
		t.Fatal(err)
	}
	if n, ok := f.catchUp(store); !ok || n != 1 {
		t.Fatalf("the record whole: %d records, ok %v; want 1, true", n, ok)
	}
	if store.Snapshot().Service(model.ServiceKey{Namespace: "default", Name: "b"}) == nil {
		t.Fatal("Service b not in the store")
	}
	write := func(path string, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A gap: a record after the next.
	p.pub = NewPublisher(path, true)
	c["svc-b"] = jService("b", 80, nil, nil)
	p.publish(c)
	if l, err = Load(Options{Path: path, ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	h, _, id, _ = readPublicationHeader(path)
	f.reset(h, id, l.API)
	c["svc-c"] = jService("c", 80, nil, nil)
	p.publish(c)
	c["svc-d"] = jService("d", 80, nil, nil)
	p.publish(c)
	data, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	gap := strings.Join(append(lines[:len(lines)-3:len(lines)-3], lines[len(lines)-2]), "")
	write(jpath, []byte(gap))
	if _, ok := f.catchUp(store); ok || f.following() {
		t.Fatalf("a gap: ok %v, following %v; want neither", ok, f.following())
	}

	// A journal that does not continue the one followed.
	f.reset(h, id, l.API)
	if err := os.Remove(jpath); err != nil {
		t.Fatal(err)
	}
	p.pub = NewPublisher(path, true)
	p.publish(c)
	if _, ok := f.catchUp(store); ok {
		t.Fatal("a journal without prev followed")
	}

	// A publication ahead of its journal (a crash between the two).
	l, err = Load(Options{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	h, _, id, _ = readPublicationHeader(path)
	f.reset(h, id, l.API)
	if !f.following() {
		t.Fatal("not following")
	}
	if _, ok := f.catchUp(store); !ok {
		t.Fatal("nothing changed: not followed")
	}

	// The publication edited under its number: not the publisher's.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a new mtime
	if err := os.WriteFile(path, append(b, "---\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.catchUp(store); ok {
		t.Fatal("a publication edited in place under its number: followed")
	}
	h, _, id, _ = readPublicationHeader(path)
	f.reset(h, id, l.API)
	ahead := h
	ahead.Seq += 2
	b, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "\n")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("%s{\"seq\":%d,\"journal\":%q}\n%s", publicationMark, ahead.Seq, ahead.Journal, rest)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.catchUp(store); ok {
		t.Fatal("a publication ahead of its journal: followed")
	}
}

// TestSourceFollowsJournal: a running Source of a publication takes each
// change published after its first read from the journal, through the
// file system's events, without reading the publication again.
// count is c's value.
func count(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func TestSourceFollowsJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	p := &publisher{t: t, path: path, pub: NewPublisher(path, true)}
	c := cluster{"svc-a": jService("a", 80, nil, nil)}
	p.publish(c)
	var sink logtest.Sink
	m := NewMetrics()
	sub := runSource(t, Options{Path: path, Metrics: m}, sink.Logger(2))
	waitFor(t, sub, "first read", func(s *model.Snapshot) bool {
		return s.Synced && s.Service(model.ServiceKey{Namespace: "default", Name: "a"}) != nil
	})
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		c["svc-"+name] = jService(name, 80, nil, nil)
		delete(c, "svc-a")
		p.publish(c)
		key := model.ServiceKey{Namespace: "default", Name: name}
		waitFor(t, sub, name, func(s *model.Snapshot) bool {
			return s.Service(key) != nil && s.Service(model.ServiceKey{Namespace: "default", Name: "a"}) == nil
		})
	}
	if n := sink.Count("Loaded manifests"); n != 1 {
		t.Errorf("read the publication whole %d times, want once:\n%s", n, strings.Join(sink.Lines(), "\n"))
	}
	if n := sink.Count("Followed the publication's journal"); n < 5 {
		t.Errorf("followed the journal %d times, want 5 or more:\n%s", n, strings.Join(sink.Lines(), "\n"))
	}
	// The counters follow the store's writes: the last record's may lag
	// the snapshot that showed it.
	for deadline := time.Now().Add(5 * time.Second); count(m.JournalRecords) < 5 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if loads, records := count(m.Loads), count(m.JournalRecords); loads != 1 || records != 5 {
		t.Errorf("metrics: %v loads and %v journal records, want 1 and 5", loads, records)
	}
}

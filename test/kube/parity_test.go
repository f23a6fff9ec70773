//lint:file-ignore SA1019 the fixture has legacy v1 Endpoints on purpose: their mirroring is compared

package kube

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/source/file"
	kubesource "github.com/svcnet/svcnet/internal/source/kube"
)

const (
	serviceCIDRs = "10.96.0.0/12,fd00:96::/108"
	manyPods     = 130 // more than one slice's 100 endpoints
)

// TestParityWithKubernetes applies the same manifests to a real kube-apiserver +
// kube-controller-manager and to the embedded control plane, reads both into the
// model (the kube source and the file source), and requires the same model: every
// field, every endpoint set, every slice split, with only the concrete allocated
// addresses and ports allowed to differ (each must lie in its range).
func TestParityWithKubernetes(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, "testdata/parity", dir)
	writeManyPods(t, filepath.Join(dir, "30-many.yaml"))

	env := kubetest.Start(t, kubetest.Options{ControllerManager: true, ServiceClusterIPRange: serviceCIDRs})
	objs, decodeErrs, err := file.ReadManifests(dir)
	if err != nil || len(decodeErrs) > 0 {
		t.Fatalf("fixture: %v %v", err, decodeErrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, o := range objs {
		if err := apply(ctx, env.Client, o); err != nil {
			t.Fatalf("applying %s to kube-apiserver: %v", o.Origin, err)
		}
	}

	cfg := controlplane.Config{NodePortRange: controlplane.PortRange{First: 30000, Last: 32767}}
	for _, c := range strings.Split(serviceCIDRs, ",") {
		cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, netip.MustParsePrefix(c))
	}
	loaded, err := file.Load(file.Options{Path: dir, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Errors) > 0 {
		t.Fatalf("embedded control plane refused fixture objects: %v", loaded.Errors)
	}
	fileStore := model.NewStore()
	fileStore.Update(func(tx *model.Txn) { tx.Replace(loaded.Services, loaded.EndpointSlices, loaded.Nodes, loaded.Pods) })
	// default/kubernetes differs by design (the real one points at the apiserver's
	// port and address); it is checked on its own below.
	skip := func(k model.ServiceKey) bool { return k.Namespace == "default" && k.Name == "kubernetes" }
	want, fileAlloc := normalize(fileStore.Snapshot(), skip)

	kubeStore := model.NewStore()
	src := kubesource.New(env.Client, kubeStore, kubesource.Options{Pods: true, Logger: klog.Background()})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	defer func() { stop(); <-done }()

	// kube-controller-manager builds the slices asynchronously: wait, bounded, until
	// the models agree, then report the difference if they never do.
	var got world
	var kubeAlloc allocations
	var diff string
	err = kubetest.Wait(90*time.Second, func() (bool, string) {
		got, kubeAlloc = normalize(kubeStore.Snapshot(), skip)
		diff = cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}), cmpopts.EquateEmpty())
		return diff == "", "models differ"
	})
	if err != nil {
		t.Fatalf("embedded control plane and Kubernetes disagree (-embedded +kubernetes):\n%s", diff)
	}
	if n := len(want.Services); n < 11 {
		t.Fatalf("only %d Services compared", n)
	}
	// Every slice holds at most 100 endpoints; the embedded control plane packs them
	// fully, as the controller does when it builds slices from scratch.
	if got := sliceSizes(fileStore.Snapshot())["parity/many"]; !slices.Equal(got, []int{manyPods % 100, 100}) {
		t.Errorf("embedded slices of parity/many hold %v endpoints, want [%d 100]", got, manyPods%100)
	}
	for svc, sizes := range sliceSizes(kubeStore.Snapshot()) {
		if sizes[len(sizes)-1] > 100 {
			t.Errorf("kubernetes: %s has a slice of %d endpoints", svc, sizes[len(sizes)-1])
		}
	}
	checkAllocations(t, "embedded", fileAlloc, cfg)
	checkAllocations(t, "kubernetes", kubeAlloc, cfg)
	for _, snap := range []*model.Snapshot{fileStore.Snapshot(), kubeStore.Snapshot()} {
		k := snap.Service(model.ServiceKey{Namespace: "default", Name: "kubernetes"})
		if k == nil || k.Service.ClusterIPs[0] != netip.MustParseAddr("10.96.0.1") || k.Service.Ports[0].Port != 443 {
			t.Errorf("default/kubernetes = %+v, want 10.96.0.1:443", k)
		}
	}
}

// checkAllocations requires every ClusterIP in the range of its family, one per
// family at most, and every node port in the node port range.
func checkAllocations(t *testing.T, who string, a allocations, cfg controlplane.Config) {
	t.Helper()
	for svc, ips := range a.ClusterIPs {
		seen := map[ipfamily.Family]bool{}
		for _, ip := range ips {
			in := false
			for _, p := range cfg.ServiceCIDRs {
				in = in || p.Contains(ip)
			}
			if !in || seen[ipfamily.Of(ip)] {
				t.Errorf("%s: %s clusterIP %s outside %v or repeated family", who, svc, ip, cfg.ServiceCIDRs)
			}
			seen[ipfamily.Of(ip)] = true
		}
	}
	for svc, ports := range a.NodePorts {
		for _, p := range append(ports, a.HealthCheckNodePorts[svc]) {
			if p != 0 && (p < cfg.NodePortRange.First || p > cfg.NodePortRange.Last) {
				t.Errorf("%s: %s node port %d outside %s", who, svc, p, cfg.NodePortRange)
			}
		}
	}
}

// apply creates one manifest object as a user plus a kubelet would: status (which
// the apiserver ignores on create) through the status subresource, and a deletion
// timestamp by deleting an object that a finalizer holds.
func apply(ctx context.Context, c kubernetes.Interface, o controlplane.Object) error {
	co := metav1.CreateOptions{}
	switch obj := o.Obj.(type) {
	case *corev1.Namespace:
		_, err := c.CoreV1().Namespaces().Create(ctx, obj, co)
		return err
	case *corev1.Node:
		created, err := c.CoreV1().Nodes().Create(ctx, obj, co)
		if err != nil {
			return err
		}
		created.Status = obj.Status
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	case *corev1.Service:
		_, err := c.CoreV1().Services(obj.Namespace).Create(ctx, obj, co)
		return err
	case *corev1.Endpoints:
		_, err := c.CoreV1().Endpoints(obj.Namespace).Create(ctx, obj, co)
		return err
	case *discoveryv1.EndpointSlice:
		_, err := c.DiscoveryV1().EndpointSlices(obj.Namespace).Create(ctx, obj, co)
		return err
	case *corev1.Pod:
		in := obj.DeepCopy()
		in.DeletionTimestamp, in.DeletionGracePeriodSeconds = nil, nil
		created, err := c.CoreV1().Pods(in.Namespace).Create(ctx, in, co)
		if err != nil {
			return err
		}
		created.Status = obj.Status
		if _, err := c.CoreV1().Pods(in.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if obj.DeletionTimestamp != nil {
			return c.CoreV1().Pods(in.Namespace).Delete(ctx, in.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		return nil
	}
	return fmt.Errorf("fixture has an object of type %T", o.Obj)
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeManyPods writes Service "many" and manyPods ready Pods behind it, alternating
// nodes, so the slice split at 100 endpoints is compared too.
func writeManyPods(t *testing.T, path string) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: many, namespace: parity}\nspec:\n  selector: {app: many}\n  ports: [{port: 80, targetPort: 8080}]\n")
	for i := 0; i < manyPods; i++ {
		node := 1 + i%2
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: many-%03d, namespace: parity, labels: {app: many}}
spec:
  nodeName: node%d
  containers: [{name: c, image: nginx}]
status:
  phase: Running
  podIP: 192.168.%d.%d
  podIPs: [{ip: 192.168.%d.%d}]
  conditions: [{type: Ready, status: "True"}]
`, i, node, node, 100+i/2, node, 100+i/2)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

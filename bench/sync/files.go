package syncbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// ToolSvcnetFile is svcnet proxy on the embedded default: manifests and its
// embedded control plane (--state), no API server. ToolSvcnetFileWarm is the
// same started as a restarted agent is, with the decode cache an earlier
// process left beside the manifest.
const (
	ToolSvcnetFile     = "svcnet-file"
	ToolSvcnetFileWarm = "svcnet-file-warm"
)

// SvcnetFile runs `svcnet proxy --state FILE` from bin, as Svcnet otherwise.
// FILE holds the population as the lab publishes a cluster: one manifest,
// every object a JSON document on a line of its own, each Service with the
// ClusterIP the apiserver gave it (so its frontends are those of every
// other tool). Each change
// replaces the file, atomically as the lab does, with one more Service.
// Its proxy starts without the decode cache a previous run of svcnet on
// the file would have left: the cold start.
func SvcnetFile(bin string) Tool {
	t := svcnetTool(bin, ToolSvcnetFile, "sf", svcnetFrontends)
	argv := t.Argv
	t.Argv = func(state string) []string {
		a := argv("")
		for i := range a {
			if a[i] == "--kubeconfig" {
				a[i] = "--state"
				a[i+1] = state
			}
		}
		return a
	}
	t.Files = true
	return t
}

// SvcnetFileWarm is SvcnetFile started after `svcnet get services -A
// --state FILE` has read the manifest once (and left its decode cache and
// allocations, as an earlier agent would).
func SvcnetFileWarm(bin string) Tool {
	t := SvcnetFile(bin)
	t.Name, t.Short = ToolSvcnetFileWarm, "sw"
	t.Warm = []string{bin, "get", "services", "-A", "--state"}
	return t
}

// manifest is the file a file-mode tool reads: the documents written so
// far, and where.
type manifest struct {
	path string
	docs bytes.Buffer
}

// newManifest lists the population (Services, EndpointSlices) of namespace
// and the node, and returns them as one manifest at path (not yet written).
func newManifest(ctx context.Context, c kubernetes.Interface, namespace, path string) (*manifest, error) {
	m := &manifest{path: path}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	node, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("manifest: node: %w", err)
	}
	if err := m.add(node); err != nil {
		return nil, err
	}
	svcs, err := c.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("manifest: services: %w", err)
	}
	for i := range svcs.Items {
		if err := m.add(&svcs.Items[i]); err != nil {
			return nil, err
		}
	}
	slices, err := c.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("manifest: endpointslices: %w", err)
	}
	for i := range slices.Items {
		if err := m.add(&slices.Items[i]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// add appends obj as a user would write it: kind and apiVersion, name,
// namespace, labels and spec; a Service's allocated ClusterIPs as its
// request, nothing the API server adds.
func (m *manifest) add(obj runtime.Object) error {
	var out runtime.Object
	switch o := obj.(type) {
	case *corev1.Service:
		out = &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: userMeta(o.ObjectMeta),
			Spec:       o.Spec,
		}
	case *discoveryv1.EndpointSlice:
		s := o.DeepCopy()
		s.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
		s.ObjectMeta = userMeta(o.ObjectMeta)
		out = s
	case *corev1.Node:
		out = &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: userMeta(o.ObjectMeta),
			Spec:       corev1.NodeSpec{PodCIDR: o.Spec.PodCIDR, PodCIDRs: o.Spec.PodCIDRs},
			Status:     corev1.NodeStatus{Addresses: o.Status.Addresses, Conditions: o.Status.Conditions},
		}
	default:
		return fmt.Errorf("manifest: %T not handled", obj)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	m.docs.WriteString("---\n")
	m.docs.Write(b)
	m.docs.WriteByte('\n')
	return nil
}

func userMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels}
}

// write replaces the file with the documents so far, as an atomic writer
// does (temporary file, fsync, rename), and returns when the rename
// happened: the moment a reader can see the change.
func (m *manifest) write() (time.Time, error) {
	tmp, err := os.CreateTemp(filepath.Dir(m.path), ".manifest-*.tmp")
	if err != nil {
		return time.Time{}, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(m.docs.Bytes())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("manifest: %w", err)
	}
	at := time.Now()
	if err := os.Rename(tmp.Name(), m.path); err != nil {
		return time.Time{}, fmt.Errorf("manifest: %w", err)
	}
	return at, nil
}

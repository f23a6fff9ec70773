//lint:file-ignore SA1019 legacy v1 Endpoints are applied as given, as kubectl applies them

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/describe"
	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/lb/pool"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// Kube is a real control plane: etcd, kube-apiserver and
// kube-controller-manager (EndpointSlices) running detached in the lab's NAME.cp
// namespace at 172.26.236.176:6443. The lab reaches it by dialing from inside that
// namespace; the nodes' proxies over the lab network with Dir/kubeconfig. The lab
// plays the kubelet: it registers Nodes and reports Pod status.
type Kube struct {
	c      *kubecluster.Cluster
	client kubernetes.Interface
}

func kubeDir(n topology.Names) string { return n.Path("kube") }

func kubeOptions(n topology.Names, cp *netns.NS) kubecluster.Options {
	return kubecluster.Options{
		Dir:     kubeDir(n),
		Detach:  true,
		Dial:    kubecluster.DialFunc(netns.Dialer(cp)),
		Command: func(name string, args ...string) *exec.Cmd { return cp.Command(append([]string{name}, args...)...) },
	}
}

// StartKube starts the kube control plane of lab n, of IP families s: its
// --service-cluster-ip-range is s's Service ranges, and it advertises and
// serves on its address of the primary family (kube-apiserver wants the
// advertised address of the first range's family).
func StartKube(ctx context.Context, n topology.Names, s topology.Stack, fabric *netns.NS, bin string) (*Kube, error) {
	// cp stays open as long as the cluster value: its dialer enters it.
	cp, err := topology.Attach(fabric, n.Control(), "cp", s.ControlAddrs(), false)
	if err != nil {
		return nil, err
	}
	o := kubeOptions(n, cp)
	o.BinDir = bin
	o.ControllerManager = true
	o.ServiceClusterIPRange = topology.Join(s.ServiceRanges())
	o.AdvertiseAddress = s.ControlAddr().String()
	o.BindAddress = s.ControlAddr().String()
	o.Ports = kubecluster.DefaultPorts
	o.ServerURL = "https://" + netip.AddrPortFrom(s.ControlAddr(), uint16(kubecluster.DefaultPorts.APIServer)).String()
	c, err := kubecluster.Start(ctx, o)
	if err != nil {
		cp.Close()
		return nil, err
	}
	return newKube(c)
}

func AttachKube(ctx context.Context, n topology.Names) (ControlPlane, error) {
	cp, err := netns.Open(n.Control())
	if err != nil {
		return nil, fmt.Errorf("lab %s: control plane: %w", n.Lab, err)
	}
	c, err := kubecluster.Attach(ctx, kubeOptions(n, cp))
	if err != nil {
		cp.Close()
		return nil, fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	return newKube(c)
}

// clientQPS is the client-side rate limit of the lab's own API calls, above
// kubecluster's default (200/s) so that the apiserver, not the client, bounds
// a large Apply.
const clientQPS = 2000

func newKube(c *kubecluster.Cluster) (*Kube, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = clientQPS, 2*clientQPS
	// Protobuf for the built-in kinds the typed client handles: a large Apply
	// (the data-path benchmark's 20,000 objects) spends less of the shared
	// CPUs in the apiserver's decoding. The dynamic client (pools) keeps JSON.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	return &Kube{c: c, client: client}, nil
}

// Reader reads from the API server, for describe.
func (k *Kube) Reader(context.Context) (describe.Reader, error) {
	return describe.Client{C: k.client}, nil
}

func (k *Kube) ProxyArgs() []string { return []string{"--kubeconfig", k.c.Kubeconfig} }

func (k *Kube) RegisterNodes(ctx context.Context, nodes []*corev1.Node) error {
	for _, n := range nodes {
		st := n.Status
		created, err := k.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("Node %s: %w", n.Name, err)
		}
		created.Status = st
		if _, err := k.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("Node %s: status: %w", n.Name, err)
		}
	}
	return nil
}

// applyWorkers bounds the API calls Apply makes at once.
const applyWorkers = 8

// Apply applies objs, which come sorted by applyOrder: objects of one order do
// not depend on each other, so each run of them is applied by up to
// applyWorkers calls at once, and the runs one after the other. Errors are
// returned in the objects' order.
func (k *Kube) Apply(ctx context.Context, objs []controlplane.Object) []error {
	errs := make([]error, len(objs))
	for start := 0; start < len(objs); {
		end := start + 1
		for end < len(objs) && ApplyOrder(objs[end].Obj) == ApplyOrder(objs[start].Obj) {
			end++
		}
		var wg sync.WaitGroup
		slots := make(chan struct{}, applyWorkers)
		for i := start; i < end; i++ {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				if err := k.apply(ctx, objs[i].Obj); err != nil {
					m, _ := MetaOf(objs[i].Obj)
					errs[i] = fmt.Errorf("%s: %s %s: %w", objs[i].Origin, KindOf(objs[i].Obj), qualified(m.GetNamespace(), m.GetName()), err)
				}
			})
		}
		wg.Wait()
		start = end
	}
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// apply creates obj, or updates the object of its name keeping what the control
// plane allocated and the user did not ask for (ClusterIPs, node ports), as
// `kubectl apply` does.
func (k *Kube) apply(ctx context.Context, obj runtime.Object) error {
	c := k.client
	co, up := metav1.CreateOptions{}, metav1.UpdateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = c.CoreV1().Namespaces().Create(ctx, o, co)
		if apierrors.IsAlreadyExists(err) {
			var old *corev1.Namespace
			if old, err = c.CoreV1().Namespaces().Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
				o.ResourceVersion = old.ResourceVersion
				_, err = c.CoreV1().Namespaces().Update(ctx, o, up)
			}
		}
	case *corev1.Service:
		_, err = c.CoreV1().Services(o.Namespace).Create(ctx, o, co)
		if apierrors.IsAlreadyExists(err) {
			var old *corev1.Service
			if old, err = c.CoreV1().Services(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
				keepAllocations(o, old)
				_, err = c.CoreV1().Services(o.Namespace).Update(ctx, o, up)
			}
		}
	case *corev1.Endpoints:
		_, err = c.CoreV1().Endpoints(o.Namespace).Create(ctx, o, co)
		if apierrors.IsAlreadyExists(err) {
			var old *corev1.Endpoints
			if old, err = c.CoreV1().Endpoints(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
				o.ResourceVersion = old.ResourceVersion
				_, err = c.CoreV1().Endpoints(o.Namespace).Update(ctx, o, up)
			}
		}
	case *discoveryv1.EndpointSlice:
		_, err = c.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, co)
		if apierrors.IsAlreadyExists(err) {
			var old *discoveryv1.EndpointSlice
			if old, err = c.DiscoveryV1().EndpointSlices(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
				o.ResourceVersion = old.ResourceVersion
				_, err = c.DiscoveryV1().EndpointSlices(o.Namespace).Update(ctx, o, up)
			}
		}
	case *pool.IPAddressPool:
		err = k.applyPool(ctx, o)
	default:
		err = errors.New("kind not supported by the lab (want Service, Namespace, EndpointSlice, Endpoints or IPAddressPool)")
	}
	return err
}

// keepAllocations copies into svc what the apiserver allocated for old and svc
// leaves unset, and old's resourceVersion.
func keepAllocations(svc, old *corev1.Service) {
	svc.ResourceVersion = old.ResourceVersion
	if svc.Spec.ClusterIP == "" {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = old.Spec.ClusterIP, old.Spec.ClusterIPs
	}
	if len(svc.Spec.IPFamilies) == 0 {
		svc.Spec.IPFamilies = old.Spec.IPFamilies
	}
	if svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		for _, q := range old.Spec.Ports {
			if p.NodePort == 0 && q.Port == p.Port && protoOrTCP(q.Protocol) == protoOrTCP(p.Protocol) {
				p.NodePort = q.NodePort
			}
		}
	}
}

func protoOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func (k *Kube) Delete(ctx context.Context, kind, namespace, name string) error {
	c, do := k.client, metav1.DeleteOptions{}
	switch kind {
	case "Service":
		return c.CoreV1().Services(namespace).Delete(ctx, name, do)
	case "Namespace":
		return c.CoreV1().Namespaces().Delete(ctx, name, do)
	case "Endpoints":
		return c.CoreV1().Endpoints(namespace).Delete(ctx, name, do)
	case "EndpointSlice":
		return c.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name, do)
	case pool.Kind:
		dyn, err := dynamic.NewForConfig(k.c.Config)
		if err != nil {
			return err
		}
		return dyn.Resource(poolResource).Delete(ctx, name, do)
	}
	return fmt.Errorf("delete %s: kind not supported", kind)
}

func (k *Kube) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	p, err := k.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return p, err
}

func (k *Kube) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	created, err := k.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	pod.ObjectMeta = created.ObjectMeta
	return nil
}

func (k *Kube) SetPodStatus(ctx context.Context, pod *corev1.Pod) error {
	cur, err := k.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !equalStrings(cur.Labels, pod.Labels) || !equalStrings(cur.Annotations, pod.Annotations) {
		cur.Labels, cur.Annotations = pod.Labels, pod.Annotations
		if cur, err = k.client.CoreV1().Pods(pod.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	cur.Status = pod.Status
	_, err = k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (k *Kube) TerminatePod(ctx context.Context, namespace, name string, grace int64) error {
	// Bound to a node, the Pod stays, terminating, until its kubelet (the lab)
	// deletes it for good.
	return k.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
}

func (k *Kube) RemovePod(ctx context.Context, namespace, name string) error {
	zero := int64(0)
	err := k.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (k *Kube) Result(ctx context.Context, _ ...string) (*controlplane.Result, error) {
	r, err := kube.List(ctx, k.client, "", kube.Services, kube.EndpointSlices, kube.Nodes, kube.Pods, kube.Events)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(k.c.Config)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	if r.Pools, err = kube.ListPools(ctx, dyn); err != nil {
		return nil, err
	}
	return r, nil
}

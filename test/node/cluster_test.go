package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

// netexecPort is the HTTP port of agnhost netexec in the test's Pods.
const netexecPort = 8080

// A 3-node cluster: every Node Ready with its zone, pod CIDR, address and
// hostname; a Deployment's Pods spread one per node and Running; Pods reach
// Pods on other nodes (agnhost's /dial, as upstream's intra-pod e2e checks
// do, and kubectl exec through the apiserver and the kubelet), a node's
// namespace reaches a Pod on another node; and the tear-down leaves the host
// as it was.
func TestCluster(t *testing.T) {
	nodetest.RequireTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	pause, agnhost := testImages(t)
	before := hostState(t)
	c := nodetest.Up(t, ctx, nodecluster.Options{CNIPlugin: svcnetBin(t), Images: []string{pause, agnhost}})
	if uses, err := c.Memory(); err == nil {
		t.Logf("memory after Up:\n%s", nodecluster.FormatMemory(uses))
	}

	t.Run("nodes", func(t *testing.T) { checkNodes(t, ctx, c) })
	var pods []corev1.Pod
	t.Run("deployment across nodes", func(t *testing.T) { pods = deployAcrossNodes(t, ctx, c) })
	if len(pods) != len(c.Nodes) {
		t.Fatalf("%d Pods running, want one per node", len(pods))
	}
	t.Run("pod to pod across nodes", func(t *testing.T) { podToPod(t, ctx, c, pods) })
	t.Run("kubectl exec", func(t *testing.T) { execConnect(t, ctx, c, pods) })
	t.Run("node to pod", func(t *testing.T) { nodeToPod(t, ctx, c, pods) })
	t.Run("attach", func(t *testing.T) { attach(t, ctx, c) })
	if uses, err := c.Memory(); err == nil {
		t.Logf("memory with %d Pods:\n%s", len(pods), nodecluster.FormatMemory(uses))
	}

	t.Run("tear-down", func(t *testing.T) {
		start := time.Now()
		if err := c.Down(); err != nil {
			t.Fatal(err)
		}
		t.Logf("down in %v", time.Since(start).Round(100*time.Millisecond))
		nodetest.CheckGone(t, c.Name, c.Dir, "down")
		checkHostState(t, before)
	})
}

func checkNodes(t *testing.T, ctx context.Context, c *nodecluster.Cluster) {
	list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(c.Nodes) {
		t.Fatalf("%d Nodes, want %d", len(list.Items), len(c.Nodes))
	}
	for _, want := range c.Nodes {
		i := slices.IndexFunc(list.Items, func(n corev1.Node) bool { return n.Name == want.Name })
		if i < 0 {
			t.Errorf("no Node %s", want.Name)
			continue
		}
		n := list.Items[i]
		if z := n.Labels[corev1.LabelTopologyZone]; z != want.Zone {
			t.Errorf("Node %s: zone %q, want %q", n.Name, z, want.Zone)
		}
		if !slices.Equal(n.Spec.PodCIDRs, []string{want.PodCIDR.String()}) {
			t.Errorf("Node %s: podCIDRs %v, want %s", n.Name, n.Spec.PodCIDRs, want.PodCIDR)
		}
		var internal []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if !slices.Equal(internal, []string{want.Addr.String()}) {
			t.Errorf("Node %s: InternalIP %v, want %s", n.Name, internal, want.Addr)
		}
		cmd, err := c.NodeCommand(ctx, n.Name, "cat", "/proc/sys/kernel/hostname")
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != n.Name {
			t.Errorf("Node %s: hostname %q (%v)", n.Name, got, err)
		}
	}
}

// deployAcrossNodes runs a Deployment of agnhost netexec, one replica per
// node (required anti-affinity by hostname), and returns its Pods once all
// are Ready.
func deployAcrossNodes(t *testing.T, ctx context.Context, c *nodecluster.Cluster) []corev1.Pod {
	labels := map[string]string{"app": "netexec"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(len(c.Nodes))),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
							TopologyKey:   corev1.LabelHostname,
						}},
					}},
					TerminationGracePeriodSeconds: ptr.To(int64(1)),
					Containers: []corev1.Container{{
						Name:            "netexec",
						Image:           agnhostImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"netexec", fmt.Sprintf("--http-port=%d", netexecPort)},
						Ports:           []corev1.ContainerPort{{ContainerPort: netexecPort}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intOrString(netexecPort)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
	start := time.Now()
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	deadline := time.Now().Add(3 * time.Minute)
	for {
		list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=netexec"})
		if err == nil {
			pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return !podReady(&p) })
			if len(pods) == len(c.Nodes) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deployment netexec: %d of %d Pods Ready after 3m (%v):\n%s", len(pods), len(c.Nodes), err, podStates(list))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d Pods Ready in %v", len(pods), time.Since(start).Round(100*time.Millisecond))
	var nodes []string
	for _, p := range pods {
		nodes = append(nodes, p.Spec.NodeName)
		if n, ok := c.NodeByName(p.Spec.NodeName); !ok || !n.PodCIDR.Contains(mustAddr(t, p.Status.PodIP)) {
			t.Errorf("Pod %s on %s: IP %s outside the node's pod CIDR", p.Name, p.Spec.NodeName, p.Status.PodIP)
		}
	}
	slices.Sort(nodes)
	if len(slices.Compact(nodes)) != len(c.Nodes) {
		t.Errorf("Pods on nodes %v, want one on each", nodes)
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Spec.NodeName, b.Spec.NodeName) })
	return pods
}

// podToPod asks each Pod's netexec to dial every Pod on another node (its
// /dial endpoint: an HTTP request from that Pod to the other's /hostname) and
// checks that the other Pod answered with its name.
func podToPod(t *testing.T, ctx context.Context, c *nodecluster.Cluster, pods []corev1.Pod) {
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: c.Config.Dial, DisableKeepAlives: true}}
	for _, from := range pods {
		for _, to := range pods {
			if from.Spec.NodeName == to.Spec.NodeName {
				continue
			}
			q := url.Values{"request": {"hostname"}, "host": {to.Status.PodIP}, "port": {fmt.Sprint(netexecPort)}, "protocol": {"http"}, "tries": {"1"}}
			u := fmt.Sprintf("http://%s:%d/dial?%s", from.Status.PodIP, netexecPort, q.Encode())
			body, err := get(ctx, hc, u)
			if err != nil {
				t.Errorf("%s (%s) -> %s (%s): %v", from.Name, from.Spec.NodeName, to.Name, to.Spec.NodeName, err)
				continue
			}
			var resp struct {
				Responses []string `json:"responses"`
				Errors    []string `json:"errors"`
			}
			if err := json.Unmarshal([]byte(body), &resp); err != nil || !slices.Equal(resp.Responses, []string{to.Name}) {
				t.Errorf("%s (%s) -> %s (%s): %s", from.Name, from.Spec.NodeName, to.Name, to.Spec.NodeName, body)
			}
		}
	}
}

// execConnect runs agnhost connect in each Pod through kubectl exec (the
// apiserver's exec, the kubelet's streaming server, containerd) to a Pod on
// the next node.
func execConnect(t *testing.T, ctx context.Context, c *nodecluster.Cluster, pods []corev1.Pod) {
	for i, from := range pods {
		to := pods[(i+1)%len(pods)]
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := c.Kubectl(cctx, "exec", "-n", "default", from.Name, "--", "/agnhost", "connect",
			fmt.Sprintf("%s:%d", to.Status.PodIP, netexecPort), "--timeout=5s").CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("kubectl exec %s -- agnhost connect %s (%s): %v: %s", from.Name, to.Status.PodIP, to.Spec.NodeName, err, out)
		}
	}
}

// nodeToPod: from each node's namespace, a Pod on another node answers.
func nodeToPod(t *testing.T, ctx context.Context, c *nodecluster.Cluster, pods []corev1.Pod) {
	for _, n := range c.Nodes {
		ns, err := netns.Open(n.NetNS)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}}
		for _, p := range pods {
			if p.Spec.NodeName == n.Name {
				continue
			}
			body, err := get(ctx, hc, fmt.Sprintf("http://%s:%d/hostname", p.Status.PodIP, netexecPort))
			if err != nil || body != p.Name {
				t.Errorf("%s -> %s (%s): %q %v", n.Name, p.Name, p.Spec.NodeName, body, err)
			}
		}
		ns.Close()
	}
}

// attach: the cluster found again from its directory has its nodes, and its
// client, kubectl and node commands work.
func attach(t *testing.T, ctx context.Context, c *nodecluster.Cluster) {
	a, err := nodecluster.Attach(ctx, c.Dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Name != c.Name || !slices.Equal(a.Nodes, c.Nodes) || a.Kubeconfig != c.Kubeconfig {
		t.Errorf("attached: %s %v %s, want %s %v %s", a.Name, a.Nodes, a.Kubeconfig, c.Name, c.Nodes, c.Kubeconfig)
	}
	list, err := a.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != len(c.Nodes) {
		t.Errorf("attached client: %d Nodes, %v", len(list.Items), err)
	}
	out, err := a.Kubectl(ctx, "get", "nodes", "-o", "name").CombinedOutput()
	if got := strings.Fields(string(out)); err != nil || len(got) != len(c.Nodes) {
		t.Errorf("kubectl get nodes: %v: %s", err, out)
	}
	n := c.Nodes[len(c.Nodes)-1]
	cmd, err := a.NodeCommand(ctx, n.Name, "cat", "/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != n.Name {
		t.Errorf("attached node command on %s: %q, %v", n.Name, out, err)
	}
}

func get(ctx context.Context, hc *http.Client, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", u, resp.Status, b)
	}
	return strings.TrimSpace(string(b)), nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podStates(list *corev1.PodList) string {
	if list == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range list.Items {
		fmt.Fprintf(&b, "  %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " (%s: %s)", w.Reason, w.Message)
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				fmt.Fprintf(&b, " [%s: %s]", c.Type, c.Message)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func intOrString(port int) intstr.IntOrString { return intstr.FromInt32(int32(port)) }

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("address %q: %v", s, err)
	}
	return a
}

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/conformance"
	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

// svcnetWorkloads are what deploy/ runs, in the order they come up: the
// proxy first (host network; it programs the kubernetes Service the others
// reach the API server through), then the CNI plugin (the nodes become
// Ready), then the Pods on the pod network.
var svcnetWorkloads = []string{"daemonset/svcnet-proxy", "daemonset/svcnet-cni", "deployment/svcnet-dns", "deployment/svcnet-lb-controller"}

// deploySvcnet deploys svcnet on c as a user replacing kube-proxy, MetalLB,
// CoreDNS and the CNI plugin does (the READMEs under deploy/): the memberlist
// Secret, then `kubectl apply -k` of an overlay of deploy/cni, deploy/proxy,
// deploy/dns and deploy/lb that only adds the API server's address, then the
// example pool; and waits for every workload to roll out.
func deploySvcnet(t *testing.T, ctx context.Context, c *nodecluster.Cluster) {
	t.Helper()
	memberlistSecret(t, ctx, c)
	overlay{
		resources: []string{"deploy/cni", "deploy/proxy", "deploy/dns", "deploy/lb"},
		patches:   []string{apiserverPatch(t, c, "svcnet-proxy")},
	}.apply(t, ctx, c)
	rollout(t, ctx, c, svcnetWorkloads...)
	kubectl(t, ctx, c, "apply", "-f", repoPath(t, "deploy/lb/example-pool.yaml"))
}

// TestSvcnet is svcnet on real nodes, deployed from its own image and
// manifests: three nodes of kubelet + containerd + runc, nothing networked
// until deploy/ is applied; then each component is Ready (and the proxy,
// which used to crash-loop on a real cluster, never restarted) and serves:
// the CNI plugin networks Pods on every node, the proxy serves a Service's
// ClusterIP, NodePorts and LoadBalancer IP across nodes, svcnet lb gives that
// IP from the pool and the speaker answers for it, svcnet dns resolves for
// Pods. Last, Kubernetes' own [sig-network] [Conformance] specs run against it
// (every one must pass).
func TestSvcnet(t *testing.T) {
	nodetest.RequireTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	c := nodetest.Up(t, ctx, nodecluster.Options{Images: allImages(t)})
	deploySvcnet(t, ctx, c)

	t.Run("ready", func(t *testing.T) { checkSvcnetPods(t, ctx, c) })
	pods := deployAcrossNodes(t, ctx, c)
	if len(pods) != len(c.Nodes) {
		t.Fatalf("%d Pods running, want one per node", len(pods))
	}
	svc := exposeNetexec(t, ctx, c)
	t.Run("cni", func(t *testing.T) { podToPod(t, ctx, c, pods) })
	t.Run("proxy-clusterip", func(t *testing.T) { dialFromPods(t, ctx, c, pods, svc.Spec.ClusterIP, 80) })
	t.Run("proxy-nodeport", func(t *testing.T) {
		for _, n := range c.Nodes {
			answeredFromOutside(t, ctx, c, n.Addr.String(), int(svc.Spec.Ports[0].NodePort), pods)
		}
	})
	t.Run("lb", func(t *testing.T) {
		ip := waitLoadBalancerIP(t, ctx, c, svc.Name)
		answeredFromOutside(t, ctx, c, ip, 80, pods)
	})
	t.Run("dns", func(t *testing.T) {
		for _, p := range pods {
			out := kubectl(t, ctx, c, "exec", "-n", "default", p.Name, "--", "getent", "hosts", "netexec.default.svc.cluster.local")
			if f := strings.Fields(out); len(f) == 0 || f[0] != svc.Spec.ClusterIP {
				t.Errorf("Pod %s on %s: getent hosts netexec.default.svc.cluster.local = %q, want %s", p.Name, p.Spec.NodeName, out, svc.Spec.ClusterIP)
			}
		}
	})
	t.Run("conformance", func(t *testing.T) {
		results := runSuite(t, ctx, c, "svcnet", conformance.NetworkConformance)
		v := conformance.Compare(results, nil, nil)
		var out strings.Builder
		_ = v.Write(&out, false)
		t.Logf("[sig-network] [Conformance] on svcnet, %d nodes:\n%s", len(c.Nodes), out.String())
		if v.Svcnet.Passed == 0 {
			t.Errorf("no spec passed: the suite did not run")
		}
		for _, p := range v.Problems {
			t.Error(p)
		}
	})
}

// checkSvcnetPods: every svcnet Pod is Running and Ready on its node, and no
// svcnet proxy container ever restarted.
func checkSvcnetPods(t *testing.T, ctx context.Context, c *nodecluster.Cluster) {
	list, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=svcnet"})
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string][]string{}
	for _, p := range list.Items {
		if !podReady(&p) {
			t.Errorf("Pod %s on %s not Ready: %s", p.Name, p.Spec.NodeName, podStates(&corev1.PodList{Items: []corev1.Pod{p}}))
		}
		perNode[p.Spec.NodeName] = append(perNode[p.Spec.NodeName], p.Labels["app.kubernetes.io/name"])
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "svcnet-proxy" && cs.RestartCount > 0 {
				t.Errorf("Pod %s: svcnet-proxy restarted %d times (last: %+v)", p.Name, cs.RestartCount, cs.LastTerminationState.Terminated)
			}
		}
	}
	for _, n := range c.Nodes {
		got := perNode[n.Name]
		for _, want := range []string{"svcnet-proxy", "svcnet-cni"} {
			if !slices.Contains(got, want) {
				t.Errorf("node %s runs %v: no %s", n.Name, got, want)
			}
		}
	}
}

// exposeNetexec creates Service default/netexec, a LoadBalancer over the
// netexec Pods (port 80 → netexecPort), and returns it once it has its
// NodePort.
func exposeNetexec(t *testing.T, ctx context.Context, c *nodecluster.Cluster) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "netexec"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(netexecPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	got, err := c.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service netexec: %v", err)
	}
	return got
}

// waitLoadBalancerIP waits for svcnet lb to give Service default/NAME an
// ingress IP and returns it.
func waitLoadBalancerIP(t *testing.T, ctx context.Context, c *nodecluster.Cluster, name string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		svc, err := c.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(svc.Status.LoadBalancer.Ingress) > 0 && svc.Status.LoadBalancer.Ingress[0].IP != "" {
			return svc.Status.LoadBalancer.Ingress[0].IP
		}
		if time.Now().After(deadline) {
			events, _ := c.Kubectl(ctx, "get", "events", "-A", "--field-selector", "involvedObject.name="+name).CombinedOutput()
			t.Fatalf("Service %s: no LoadBalancer IP after 2m (%v); events:\n%s", name, err, events)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// dialFromPods asks each Pod's netexec to dial host:port (its /dial
// endpoint) ten times and checks that Pods answered, on more than one node. A
// Service just created may not be programmed yet: each Pod asks again, for up
// to a minute, until an answer comes.
func dialFromPods(t *testing.T, ctx context.Context, c *nodecluster.Cluster, pods []corev1.Pod, host string, port int) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: c.Config.Dial, DisableKeepAlives: true}}
	names := podNames(pods)
	for _, from := range pods {
		q := url.Values{"request": {"hostname"}, "host": {host}, "port": {fmt.Sprint(port)}, "protocol": {"http"}, "tries": {"10"}}
		u := fmt.Sprintf("http://%s:%d/dial?%s", from.Status.PodIP, netexecPort, q.Encode())
		var resp struct {
			Responses []string `json:"responses"`
		}
		var last string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
			body, err := get(ctx, hc, u)
			last = fmt.Sprint(body, err)
			if err == nil && json.Unmarshal([]byte(body), &resp) == nil && len(resp.Responses) > 0 {
				break
			}
			if time.Now().After(deadline) {
				break
			}
		}
		if len(resp.Responses) == 0 {
			t.Errorf("%s (%s) -> %s:%d for a minute: %s", from.Name, from.Spec.NodeName, host, port, last)
			continue
		}
		seen := map[string]bool{}
		for _, r := range resp.Responses {
			if !slices.Contains(names, r) {
				t.Errorf("%s -> %s:%d answered by %q, not a netexec Pod", from.Name, host, port, r)
			}
			seen[r] = true
		}
		if len(seen) < 2 {
			t.Errorf("%s -> %s:%d: requests all answered by %v, want the Service's Pods on several nodes", from.Name, host, port, resp.Responses)
		}
	}
}

// answeredFromOutside sends ten requests from the control plane's namespace
// (on the node network, outside the cluster's Pods) to host:port and checks
// that netexec Pods answered.
func answeredFromOutside(t *testing.T, ctx context.Context, c *nodecluster.Cluster, host string, port int, pods []corev1.Pod) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: c.Config.Dial, DisableKeepAlives: true}}
	names := podNames(pods)
	u := fmt.Sprintf("http://%s/hostname", netJoin(host, port))
	deadline := time.Now().Add(time.Minute)
	for n := 0; n < 10; {
		body, err := get(ctx, hc, u)
		if err == nil && slices.Contains(names, body) {
			n++
			continue
		}
		if time.Now().After(deadline) {
			t.Errorf("GET %s from outside the cluster: %q, %v (after %d answers)", u, body, err, n)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

func netJoin(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

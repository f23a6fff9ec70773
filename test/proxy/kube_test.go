package proxy_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/netns"
)

// TestKube is the kube tier: a real kube-apiserver and kube-controller-manager
// (EndpointSlice controller) hold the Nodes, Pods with the pod namespaces'
// addresses, and Services; the proxy in the node namespace reads them through
// a relay to the apiserver. One control plane, one topology and one proxy
// serve every subtest (each with its own Services and Pods).
func TestKube(t *testing.T) {
	needBinary(t)
	env := kubetest.Start(t, kubetest.Options{ControllerManager: true})
	api := env.Client
	c := newCluster(t)
	// Namespaces are made here: cluster helpers fail the parent test.
	webA, webB, webD := c.addPod("web-a", 11), c.addPod("web-b", 12), c.addPod("web-d", 13)
	lbA := c.addPod("lb-a", 21)
	etpA, etpB := c.addPod("etp-a", 31), c.addPod("etp-b", 32)
	client := c.addPod("client", 40)

	kubetest.CreateNode(t, api, kubetest.Node{
		Name: nodeName, InternalIPs: []string{nodeIP.String()}, PodCIDRs: []string{"192.168.1.0/24"}, Ready: true,
	})
	kubetest.CreateNode(t, api, kubetest.Node{
		Name: otherNode, InternalIPs: []string{"172.26.236.178"}, PodCIDRs: []string{"192.168.2.0/24"}, Ready: true,
	})
	web, lb, etp := map[string]string{"app": "web"}, map[string]string{"app": "lb"}, map[string]string{"app": "etp"}
	createPod(t, api, webA, nodeName, web)
	createPod(t, api, webB, nodeName, web)
	createPod(t, api, lbA, nodeName, lb)
	createPod(t, api, etpA, nodeName, etp)
	createPod(t, api, etpB, otherNode, etp)

	kubeconfig := relayKubeconfig(t, env, c.node)
	proxy := c.spawn(c.proxyArgsFrom("--kubeconfig", kubeconfig)...)
	proxy.waitLog(t, 30*time.Second, 0, reSyncComplete)

	t.Run("ClusterIPFollowsPods", func(t *testing.T) {
		// A pod reaches the ClusterIP; deleting a Pod takes its endpoint
		// out of the rules, adding one puts it in.
		svc := createService(t, api, "web", web, nil)
		addr := hostPort(mustAddr(t, svc.Spec.ClusterIP), 80)
		reaches := func(what string, want ...*pod) {
			t.Helper()
			eventually(t, 20*time.Second, what, func() (bool, string) {
				seen := map[string]int{}
				for i := 0; i < 20; i++ {
					r, err := tcpReq(client.ns, addr, time.Second)
					if err != nil {
						return false, fmt.Sprintf("request %d: %v (so far %v)", i+1, err, seen)
					}
					seen[r.Pod]++
				}
				for _, p := range want {
					if seen[p.name] == 0 {
						return false, fmt.Sprintf("answers %v", seen)
					}
				}
				return len(seen) == len(want), fmt.Sprintf("answers %v", seen)
			})
		}
		reaches(fmt.Sprintf("%s reaching web-a and web-b", addr), webA, webB)
		deletePod(t, api, webA)
		reaches("web-a's endpoint gone", webB)
		createPod(t, api, webD, nodeName, web)
		reaches("web-d's endpoint added", webB, webD)
	})

	t.Run("LoadBalancer", func(t *testing.T) {
		// An ingress IP is served (masqueraded, Cluster policy); one with
		// ipMode Proxy is not captured.
		proxyMode := corev1.LoadBalancerIPModeProxy
		createService(t, api, "lb", lb, func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
		}, corev1.LoadBalancerIngress{IP: "172.26.236.180"}, corev1.LoadBalancerIngress{IP: "172.26.236.181", IPMode: &proxyMode})
		r := eventuallyAnswered(t, c.client, "tcp", "172.26.236.180:80", lbA.name)
		if r.Src != podGateway {
			t.Errorf("endpoint saw %v, want the node's %v (masqueraded)", r.Src, podGateway)
		}
		if fronts, state := c.plane().frontends(); hasFrontendAddr(fronts, "172.26.236.181") || !hasFrontendAddr(fronts, "172.26.236.180") {
			t.Errorf("frontends %v: want 172.26.236.180, and not the ipMode Proxy address 172.26.236.181:\n%s", fronts, state)
		}
		if r, err := tcpReq(c.client, "172.26.236.181:80", dropWait); err == nil {
			t.Errorf("the ipMode Proxy address was answered by %v", r)
		}
	})

	t.Run("LoadBalancerSourceRanges", func(t *testing.T) {
		// Inside the ranges passes, outside is dropped (no reset); the
		// NodePort is not filtered.
		svc := createService(t, api, "fw", lb, func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.LoadBalancerSourceRanges = []string{clientIP.String() + "/32"}
		}, corev1.LoadBalancerIngress{IP: "172.26.236.182"})
		const vip = "172.26.236.182:80"
		eventuallyAnswered(t, c.client, "tcp", vip, lbA.name)
		for i := 0; i < 3; i++ {
			if _, err := tcpReqFrom(c.client, outsideIP, vip, dropWait); outcome(err) != "timeout" {
				t.Fatalf("from %v (outside the ranges): %s (%v), want dropped", outsideIP, outcome(err), err)
			}
			if _, err := tcpReqFrom(c.client, clientIP, vip, reqTimeout); err != nil {
				t.Fatalf("from %v (inside the ranges): %v", clientIP, err)
			}
		}
		np := hostPort(nodeIP, int(svc.Spec.Ports[0].NodePort))
		if _, err := tcpReqFrom(c.client, outsideIP, np, reqTimeout); err != nil {
			t.Errorf("NodePort %s from %v: %v, want answered (source ranges do not filter NodePorts)", np, outsideIP, err)
		}
	})

	t.Run("ExternalTrafficPolicyLocal", func(t *testing.T) {
		// Through the ingress IP: only the local endpoint, client address
		// kept; a pod is short-circuited to every endpoint.
		createService(t, api, "etp", etp, func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}, corev1.LoadBalancerIngress{IP: "172.26.236.183"})
		const vip = "172.26.236.183:80"
		eventuallyAnswered(t, c.client, "tcp", vip)
		rs := requests(t, c.client, "tcp", vip, 10)
		if seen := byPod(rs); seen[etpA.name] != 10 {
			t.Errorf("LB IP from outside reached %v, want only the local %s", seen, etpA.name)
		}
		if src := sources(rs); len(src) != 1 || src[0] != clientIP {
			t.Errorf("endpoint saw %v, want the client's own %v", src, clientIP)
		}
		if seen := byPod(requests(t, client.ns, "tcp", vip, 30)); seen[etpA.name] == 0 || seen[etpB.name] == 0 {
			t.Errorf("pod to LB IP reached %v, want both endpoints (short-circuit)", seen)
		}
	})
}

// createService creates Service default/name (port 80/TCP to the echo port,
// selector sel), changed by mutate, then sets its LoadBalancer ingress when
// given, and returns it as stored.
func createService(t *testing.T, api kubernetes.Interface, name string, sel map[string]string, mutate func(*corev1.Service), ingress ...corev1.LoadBalancerIngress) *corev1.Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: sel,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	svc, err := api.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s: %v", name, err)
	}
	if len(ingress) > 0 {
		svc.Status.LoadBalancer.Ingress = ingress
		if svc, err = api.CoreV1().Services("default").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("set load balancer status of %s: %v", name, err)
		}
	}
	return svc
}

// createPod creates the Pod of p on node and makes it running and ready with
// p's IPv4 address.
func createPod(t *testing.T, api kubernetes.Interface, p *pod, node string, labels map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := api.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "echo", Image: "echo"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.name, err)
	}
	kubetest.SetPodStatus(t, api, "default", p.name, true, p.ip.String())
}

// deletePod deletes p's Pod at once (no kubelet would ever confirm a
// graceful deletion).
func deletePod(t *testing.T, api kubernetes.Interface, p *pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	if err := api.CoreV1().Pods("default").Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod %s: %v", p.name, err)
	}
}

// relayKubeconfig relays 127.0.0.1:<port> inside ns to the apiserver (which
// listens on the host's loopback) and returns a copy of the admin kubeconfig
// whose server is the relay. The apiserver's certificate is for 127.0.0.1,
// so TLS verification holds through the relay.
func relayKubeconfig(t *testing.T, env *kubetest.Env, ns *netns.NS) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	relay, err := netns.Forward(ctx, ns, "127.0.0.1:0", strings.TrimPrefix(env.URL, "https://"))
	if err != nil {
		t.Fatalf("relay to the apiserver: %v", err)
	}
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + relay
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	return path
}

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("address %q: %v", s, err)
	}
	return a
}

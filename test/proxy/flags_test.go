package proxy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// nodePortService is default/NAME with ClusterIP cip, port 80 and NodePort np.
func nodePortService(name, cip string, np int32) *corev1.Service {
	svc := newService(name, []string{cip}, tcpPort(80))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = np
	return svc
}

// TestConfigFileMasqueradeAllAndNodePortCIDRs: a KubeProxyConfiguration file
// (--config) sets masqueradeAll, so even a pod's ClusterIP traffic is
// masqueraded, and nodePortAddresses as a CIDR that holds the node's address,
// so the NodePort answers there.
func TestConfigFileMasqueradeAllAndNodePortCIDRs(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	svc := nodePortService("np", "10.96.0.70", 30070)
	c.apply(svc, v4(svc, local(a)))
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
nodePortAddresses: ["172.26.236.0/24"]
nftables:
  masqueradeAll: true
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c.startProxy("--config", cfg)

	r := eventuallyAnswered(t, b.ns, "tcp", "10.96.0.70:80", a.name)
	if r.Src != podGateway {
		t.Errorf("with masqueradeAll the endpoint saw %v, want the node's %v", r.Src, podGateway)
	}
	eventuallyAnswered(t, c.client, "tcp", hostPort(nodeIP, 30070), a.name)
}

// TestNodePortAddressesExcludingTheNode: --nodeport-addresses with a CIDR
// that holds none of the node's addresses serves the NodePort nowhere.
func TestNodePortAddressesExcludingTheNode(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	svc := nodePortService("np", "10.96.0.71", 30071)
	c.apply(svc, v4(svc, local(a)))
	c.startProxy("--nodeport-addresses", "10.0.0.0/8")

	eventuallyAnswered(t, c.client, "tcp", "10.96.0.71:80", a.name) // the Service itself is programmed
	if addrs, state := c.plane().nodePortAddrs(); len(addrs) > 0 {
		t.Fatalf("NodePorts served on %v, none of them in 10.0.0.0/8 (not a node address):\n%s", addrs, state)
	}
	if _, err := tcpReq(c.client, hostPort(nodeIP, 30071), time.Second); outcome(err) != "refused" {
		t.Fatalf("NodePort on %s: %s, want refused (not a Service address)", nodeIP, outcome(err))
	}
}

// TestServiceProxyName: with --service-proxy-name, only Services carrying
// that service.kubernetes.io/service-proxy-name label are programmed.
func TestServiceProxyName(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	client := c.addPod("client", 20)
	mine := newService("mine", []string{"10.96.0.80"}, tcpPort(80))
	mine.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "svcnet"}
	theirs := newService("theirs", []string{"10.96.0.81"}, tcpPort(80))
	c.apply(mine, v4(mine, local(a)), theirs, v4(theirs, local(a)))
	c.startProxy("--service-proxy-name", "svcnet")

	eventuallyAnswered(t, client.ns, "tcp", "10.96.0.80:80", a.name)
	if fronts, state := c.plane().frontends(); hasFrontendAddr(fronts, "10.96.0.81") || !hasFrontendAddr(fronts, "10.96.0.80") {
		t.Fatalf("frontends %v: want 10.96.0.80 and not 10.96.0.81, a Service without our proxy name:\n%s", fronts, state)
	}
}

// TestHealthzLivezMetrics scrapes the running proxy's endpoints as a kubelet
// probe and Prometheus would.
func TestHealthzLivezMetrics(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	svc := newService("web", []string{"10.96.0.90"}, tcpPort(80))
	c.apply(svc, v4(svc, local(a)))
	c.startProxy()

	for _, path := range []string{"/healthz", "/livez"} {
		resp, body, err := httpGet(c.node, "http://127.0.0.1:10256"+path, 2*time.Second)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if resp.StatusCode != 200 || !strings.Contains(body, `"healthy":true`) {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	_, body, err := httpGet(c.node, "http://127.0.0.1:10249/metrics", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} [1-9]`,
		`(?m)^kubeproxy_sync_full_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} [1-9]`,
		`(?m)^kubeproxy_sync_proxy_rules_last_timestamp_seconds\{ip_family="IPv4"\} [1-9]`,
		`(?m)^svcnet_proxy_services\{ip_family="IPv4"\} [1-9]`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics lacks %s", re)
		}
	}
}

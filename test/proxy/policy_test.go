package proxy_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// healthReply is the JSON body of a healthCheckNodePort answer.
type healthReply struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// checkHealth asks the healthCheckNodePort from the client until it answers
// status with n local endpoints.
func checkHealth(t *testing.T, c *cluster, port, status, n int) {
	t.Helper()
	url := fmt.Sprintf("http://%s/", hostPort(nodeIP, port))
	eventually(t, 10*time.Second, fmt.Sprintf("GET %s: %d with %d local endpoints", url, status, n), func() (bool, string) {
		resp, body, err := httpGet(c.client, url, time.Second)
		if err != nil {
			return false, err.Error()
		}
		var h healthReply
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			return false, fmt.Sprintf("body %q: %v", body, err)
		}
		got := fmt.Sprintf("%d %+v weight=%q", resp.StatusCode, h, resp.Header.Get("X-Load-Balancing-Endpoint-Weight"))
		if resp.StatusCode != status || h.LocalEndpoints != n || h.Service.Namespace != "default" || h.Service.Name != "etp" ||
			resp.Header.Get("X-Load-Balancing-Endpoint-Weight") != fmt.Sprint(n) || resp.Header.Get("Content-Type") != "application/json" {
			return false, got
		}
		return true, ""
	})
}

// TestExternalTrafficPolicyLocal: external traffic (to the NodePort and to
// an externalIP) keeps the client's address and goes to local endpoints
// only, or is dropped when there is none; a pod reaching the external IP is
// short-circuited to any endpoint; the healthCheckNodePort tells the number
// of local endpoints. (The same through a LoadBalancer ingress IP: TestKube.)
// On the userspace plane the policy keeps the choice of endpoints but not
// the client's address: the endpoint sees the node (seenAs).
func TestExternalTrafficPolicyLocal(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	client := c.addPod("client", 20)
	svc := newService("etp", []string{"10.96.0.60"}, tcpPort(80))
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.Ports[0].NodePort = 30060
	svc.Spec.HealthCheckNodePort = 30061
	svc.Spec.ExternalIPs = []string{"172.26.236.183"}
	c.apply(svc, v4(svc, local(a), remote(b)))
	proxy := c.startProxy()

	ext, np := "172.26.236.183:80", hostPort(nodeIP, 30060)
	t.Run("local-endpoint", func(t *testing.T) {
		for _, addr := range []string{ext, np} {
			eventuallyAnswered(t, c.client, "tcp", addr)
			rs := requests(t, c.client, "tcp", addr, 10)
			if seen := byPod(rs); seen[a.name] != 10 {
				t.Errorf("%s from outside reached %v, want only the local %s", addr, seen, a.name)
			}
			if src := sources(rs); len(src) != 1 || src[0] != seenAs(clientIP) {
				t.Errorf("%s: endpoint saw %v, want %v (the client %v as the plane delivers it)", addr, src, seenAs(clientIP), clientIP)
			}
		}
		checkHealth(t, c, 30061, 200, 1)
	})
	t.Run("pod-short-circuit", func(t *testing.T) {
		// A pod is not external: it reaches every endpoint, keeping its address.
		rs := requests(t, client.ns, "tcp", ext, 30)
		if seen := byPod(rs); seen[a.name] == 0 || seen[b.name] == 0 {
			t.Errorf("pod to external IP reached %v, want both endpoints (short-circuit to the cluster-wide set)", seen)
		}
		if src := sources(rs); len(src) != 1 || src[0] != seenAs(client.ip) {
			t.Errorf("pod to external IP: endpoint saw %v, want %v (the pod %v as the plane delivers it)", src, seenAs(client.ip), client.ip)
		}
	})

	// pod-a terminating but still serving: the health check counts local
	// ready endpoints only, as kube-proxy's, so it answers 503 and load
	// balancers drain the node, while traffic that still arrives reaches the
	// serving terminating pod rather than being dropped (upstream spec
	// "should fail health check node port if there are only terminating
	// endpoints").
	m := proxy.mark()
	c.apply(svc, v4(svc, terminatingEp(a, true), remote(b)))
	proxy.waitReload(t, m)
	t.Run("local-terminating-only", func(t *testing.T) {
		checkHealth(t, c, 30061, 503, 0)
		if seen := byPod(requests(t, c.client, "tcp", np, 5)); seen[a.name] != 5 {
			t.Errorf("%s from outside with only a serving terminating local endpoint reached %v, want %s", np, seen, a.name)
		}
	})

	// Move pod-a away: no local endpoint left.
	m = proxy.mark()
	c.apply(svc, v4(svc, remote(a), remote(b)))
	proxy.waitReload(t, m)
	t.Run("no-local-endpoint", func(t *testing.T) {
		checkHealth(t, c, 30061, 503, 0)
		for _, addr := range []string{ext, np} {
			if r, err := tcpReq(c.client, addr, dropWait); outcome(err) != "timeout" {
				t.Errorf("%s from outside with no local endpoint: %s (%v), want dropped", addr, outcome(err), r)
			}
		}
		if _, err := tcpReq(client.ns, ext, reqTimeout); err != nil {
			t.Errorf("pod to external IP with no local endpoint: %v, want answered (short-circuit)", err)
		}
	})
}

// TestInternalTrafficPolicyLocal: with internalTrafficPolicy Local a pod
// reaches only endpoints on its node; with none there, it is dropped.
func TestInternalTrafficPolicyLocal(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	client := c.addPod("client", 20)
	svc := newService("itp", []string{"10.96.0.70"}, tcpPort(80), udpPort(80))
	itp := corev1.ServiceInternalTrafficPolicyLocal
	svc.Spec.InternalTrafficPolicy = &itp
	c.apply(svc, v4(svc, local(a), remote(b)))
	proxy := c.startProxy()

	for _, proto := range []string{"tcp", "udp"} {
		eventuallyAnswered(t, client.ns, proto, "10.96.0.70:80")
		if seen := byPod(requests(t, client.ns, proto, "10.96.0.70:80", 20)); seen[a.name] != 20 {
			t.Errorf("%s: reached %v, want only the local %s", proto, seen, a.name)
		}
	}
	m := proxy.mark()
	c.apply(svc, v4(svc, remote(a), remote(b)))
	proxy.waitReload(t, m)
	for _, proto := range []string{"tcp", "udp"} {
		if r, err := req(client.ns, proto, "10.96.0.70:80", dropWait); outcome(err) != "timeout" {
			t.Errorf("%s with no local endpoint: %s (%v), want dropped", proto, outcome(err), r)
		}
	}
}

package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/lb/speaker"
)

// lbIP returns the Service's first LoadBalancer IP, waiting (bounded) for the
// LB controller to write it.
func (e *env) lbIP(name string) netip.Addr {
	e.t.Helper()
	var ip netip.Addr
	e.eventually("Service "+name+" has a LoadBalancer IP", func() error {
		ing := e.service(name).Status.LoadBalancer.Ingress
		if len(ing) == 0 {
			return fmt.Errorf("status.loadBalancer.ingress is empty")
		}
		var err error
		ip, err = netip.ParseAddr(ing[0].IP)
		return err
	})
	return ip
}

// lbScenarios: svcnet lb in the lab, on both control planes. The client
// reaches LoadBalancer IPs through the node network, exactly one node answers
// ARP for each, externalTrafficPolicy Local puts the IP on a node with an
// endpoint, node-ip mode serves the port on the node addresses, a source range
// filters, heartbeats forged from the client move nothing, and the owner's
// agent gone silent moves the IP to another node (and back once it is heard
// again).
func lbScenarios(t *testing.T, e *env) {
	webPods := []string{"web-1", "web-2", "web-3"}
	t.Run("ClientReachesLBIP", func(t *testing.T) {
		ip := e.lbIP("web-lb")
		if !lab.InPool(ip) {
			t.Fatalf("web-lb got %s, outside the lab pool %s", ip, lab.PoolRange)
		}
		url := fmt.Sprintf("http://%s:80/", ip)
		e.eventually("LB IP answers", func() error { return e.curl("client", url, 1, time.Second)[0].Err })
		pods, _ := answered(t, "client", e.curl("client", url, 15, 2*time.Second))
		if err := onlyKeys(pods, webPods...); err != nil {
			t.Fatal(err)
		}
		owner, err := e.l.Announcer(ip)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s is announced by node%d", ip, owner)
	})
	t.Run("PoolsListed", func(t *testing.T) {
		r, err := e.l.Get(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		modes := map[string]string{}
		for _, p := range r.Pools {
			modes[p.Name] = p.Spec.Mode
		}
		if modes[lab.PoolName] != "l2" || modes["nodes"] != "node-ip" {
			t.Fatalf("pools %v, want %s (l2) and nodes (node-ip)", modes, lab.PoolName)
		}
	})
	t.Run("DistinctIPs", func(t *testing.T) {
		seen := map[netip.Addr]string{}
		for _, name := range []string{"web-lb", "web-lb-ranges", "local-etp"} {
			ip := e.lbIP(name)
			if other, dup := seen[ip]; dup {
				t.Fatalf("%s and %s both got %s", name, other, ip)
			}
			seen[ip] = name
		}
	})
	t.Run("LocalPolicyOwnerHasEndpoint", func(t *testing.T) {
		ip := e.lbIP("local-etp")
		url := fmt.Sprintf("http://%s:80/", ip)
		e.eventually("local-etp's LB IP answers", func() error { return e.curl("client", url, 1, time.Second)[0].Err })
		owner, err := e.l.WaitAnnouncer(e.ctx, ip, func(n int) bool { return n == 2 })
		if err != nil {
			t.Fatalf("the IP of a Local Service with its only endpoint on node2: %v", err)
		}
		pods, clients := answered(t, "client", e.curl("client", url, 5, 2*time.Second))
		if err := onlyKeys(pods, "local-2"); err != nil {
			t.Fatal(err)
		}
		if err := onlyKeys(clients, localPolicyClient(2)); err != nil {
			t.Fatalf("client address not kept: %v", err)
		}
		t.Logf("%s is announced by node%d", ip, owner)
	})
	t.Run("LocalOwnershipFollowsEndpoint", func(t *testing.T) {
		local := corev1.ServiceExternalTrafficPolicyLocal
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "mover-lb", Namespace: "default"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: local,
				Selector: map[string]string{"app": "mover"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
		}
		pod := func(name, node string) *corev1.Pod {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "mover"}},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "svcnet-echo",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
			}
		}
		e.applyObjects(controlplane.Object{Origin: "lb_test", Obj: svc}, controlplane.Object{Origin: "lb_test", Obj: pod("mover-1", "node1")})
		ip := e.lbIP("mover-lb")
		url := fmt.Sprintf("http://%s:80/", ip)
		e.eventually("mover-lb answers", func() error { return e.curl("client", url, 1, time.Second)[0].Err })
		if _, err := e.l.WaitAnnouncer(e.ctx, ip, func(n int) bool { return n == 1 }); err != nil {
			t.Fatalf("the endpoint is on node1: %v", err)
		}
		e.applyObjects(controlplane.Object{Origin: "lb_test", Obj: pod("mover-3", "node3")})
		if err := e.l.Delete(e.ctx, "Pod", "default", "mover-1", time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.WaitAnnouncer(e.ctx, ip, func(n int) bool { return n == 3 }); err != nil {
			t.Fatalf("the endpoint moved to node3: %v", err)
		}
		e.eventually("mover-lb answered by mover-3", func() error {
			h := e.curl("client", url, 1, time.Second)[0]
			if h.Err != nil {
				return h.Err
			}
			if h.Reply.Pod != "mover-3" || h.ClientIP() != localPolicyClient(3) {
				return fmt.Errorf("answered by %s, which saw %s", h.Reply.Pod, h.ClientIP())
			}
			return nil
		})
	})
	t.Run("NodeIPMode", func(t *testing.T) {
		var got []string
		e.eventually("web-nodeip lists the node addresses", func() error {
			got = got[:0]
			for _, ing := range e.service("web-nodeip").Status.LoadBalancer.Ingress {
				got = append(got, ing.IP)
			}
			slices.Sort(got)
			if want := "172.26.236.177,172.26.236.178,172.26.236.179"; strings.Join(got, ",") != want {
				return fmt.Errorf("ingress %v, want %s", got, want)
			}
			return nil
		})
		for i := 1; i <= 3; i++ {
			url := fmt.Sprintf("http://%s:8088/", topology.NodeAddr(i))
			e.eventually("node-ip port answers", func() error { return e.curl("client", url, 1, time.Second)[0].Err })
			pods, _ := answered(t, "client", e.curl("client", url, 5, 2*time.Second))
			if err := onlyKeys(pods, webPods...); err != nil {
				t.Fatalf("%s: %v", url, err)
			}
		}
	})
	t.Run("SourceRangeFilters", func(t *testing.T) {
		ip := e.lbIP("web-lb-ranges")
		for _, h := range e.curl("client", fmt.Sprintf("http://%s:80/", ip), 3, 500*time.Millisecond) {
			if h.Err == nil {
				t.Fatalf("the client %s, outside loadBalancerSourceRanges 10.255.0.0/16, was answered by %s", topology.ClientAddr, h.Reply.Pod)
			}
		}
	})
	t.Run("BadPoolsRefused", func(t *testing.T) { poolScenarios(t, e) })
	// It stops an agent (and lets it go on).
	t.Run("SpoofedHeartbeats", func(t *testing.T) { heartbeatSpoofing(t, e) })
	// Last: it stops an agent (and lets it go on).
	t.Run("OwnerAgentSilent", func(t *testing.T) {
		ip := e.lbIP("web-lb")
		url := fmt.Sprintf("http://%s:80/", ip)
		e.eventually("LB IP answers", func() error { return e.curl("client", url, 1, time.Second)[0].Err })
		// The owner every speaker agrees on with every node alive and
		// Ready. The subtests before pause an agent and let it go on: its
		// node may still be NotReady, and the IP with a stand-in, for a
		// moment. Wait until every node is Ready again and the IP is with
		// that owner, rather than take whoever answers now for the owner.
		var owner int
		e.eventually("every node Ready", func() error {
			snap, _, err := e.l.TraceNetwork(e.ctx)
			if err != nil {
				return err
			}
			for _, n := range snap.Nodes() {
				if !n.Ready {
					return fmt.Errorf("node %s is not Ready", n.Name)
				}
			}
			if owner = topology.NodeIndex(speaker.Owners(speaker.Config{IsDefault: true}, snap, nil)[ip]); owner == 0 {
				return fmt.Errorf("%s: no owner among the nodes", ip)
			}
			return nil
		})
		if _, err := e.l.WaitAnnouncer(e.ctx, ip, func(n int) bool { return n == owner }); err != nil {
			t.Fatalf("before the test: %s with its owner node%d: %v", ip, owner, err)
		}
		// SIGSTOP: the agent goes silent as a dead node's does, and is not
		// restarted (a killed one is, at once, and keeps its IPs: see
		// TestSupervised*/ProxyKilled).
		pid, err := e.l.ProxyPid(owner)
		if err != nil || pid == 0 {
			t.Fatalf("node%d's proxy: pid %d, %v", owner, pid, err)
		}
		start := time.Now()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
					t.Errorf("SIGCONT node%d's proxy: %v", owner, err)
				}
			}
		}
		t.Cleanup(resume)
		next, err := e.l.WaitAnnouncer(e.ctx, ip, func(n int) bool { return n != owner })
		if err != nil {
			t.Fatalf("after node%d's agent went silent: %v", owner, err)
		}
		took := time.Since(start)
		t.Logf("node%d's agent silent: node%d announces %s after %v", owner, next, ip, took.Round(time.Millisecond))
		if took > 3*time.Second {
			t.Errorf("handover took %v, want well under 3s", took)
		}
		pods, _ := answered(t, "client", e.curl("client", url, 10, 2*time.Second))
		if err := onlyKeys(pods, webPods...); err != nil {
			t.Fatal(err)
		}
		// Heard again, the owner takes its IP back.
		resume()
		if _, err := e.l.WaitAnnouncer(e.ctx, ip, func(n int) bool { return n == owner }); err != nil {
			t.Fatalf("node%d's agent resumed: %v", owner, err)
		}
		t.Logf("node%d's agent announces %s again %v after it went silent", owner, ip, time.Since(start).Round(time.Millisecond))
		pods, _ = answered(t, "client", e.curl("client", url, 10, 2*time.Second))
		if err := onlyKeys(pods, webPods...); err != nil {
			t.Fatal(err)
		}
	})
}

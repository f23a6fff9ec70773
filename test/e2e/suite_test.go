package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbin"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// env is one lab with the fixture applied.
type env struct {
	t   *testing.T
	ctx context.Context
	l   *lab.Lab
}

// newEnv brings up a 3-node lab on the control plane and applies fixture.yaml;
// the lab is removed when the test ends, pass or fail.
func newEnv(t *testing.T, controlPlane string) *env {
	t.Helper()
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	l := labtest.Up(t, ctx, lab.Options{Name: labtest.Name("e2e") + "-" + controlPlane, Nodes: 3,
		ControlPlane: controlPlane, Binary: svcnetBin, Progress: testWriter{t}}, "fixture.yaml")
	return &env{t: t, ctx: ctx, l: l}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Logf("%s", b); return len(b), nil }

// release lets go of the lab's lock, which the CLI takes, and returns the
// lab's name and a func that opens the lab again (to defer; the lab it opens
// is closed when t ends).
func (e *env) release(t *testing.T) (string, func()) {
	t.Helper()
	name := e.l.Names().Lab
	e.l.Close()
	return name, func() {
		l, err := lab.Open(e.ctx, name)
		if err != nil {
			t.Fatalf("reopen the lab: %v", err)
		}
		e.l = l
		t.Cleanup(l.Close)
	}
}

func (e *env) applyObjects(objs ...controlplane.Object) {
	e.t.Helper()
	if errs := e.l.Apply(e.ctx, objs); len(errs) > 0 {
		e.t.Fatalf("apply: %v", errs)
	}
}

func (e *env) service(name string) *corev1.Service {
	e.t.Helper()
	r, err := e.l.Get(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range r.Services {
		if s.Namespace == "default" && s.Name == name {
			return s
		}
	}
	e.t.Fatalf("Service default/%s not found", name)
	return nil
}

func (e *env) pod(name string) *corev1.Pod {
	e.t.Helper()
	return e.podIn("default", name)
}

func (e *env) podIn(namespace, name string) *corev1.Pod {
	e.t.Helper()
	r, err := e.l.Get(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range r.Pods {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	e.t.Fatalf("Pod %s/%s not found", namespace, name)
	return nil
}

func (e *env) place(where string) lab.Place {
	e.t.Helper()
	p, err := e.l.Resolve(e.ctx, where)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) dialer(where string) echo.DialFunc {
	e.t.Helper()
	d, done, err := e.l.Dialer(e.place(where))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(done)
	return d
}

func (e *env) curl(from, url string, n int, timeout time.Duration) []lab.Hit {
	e.t.Helper()
	hits, err := e.l.Curl(e.ctx, e.place(from), url, n, timeout)
	if err != nil {
		e.t.Fatal(err)
	}
	return hits
}

// eventually retries fn every 100ms until it succeeds or 30s pass: for what a
// proxy programs after a change.
func (e *env) eventually(what string, fn func() error) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: still failing after 30s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clusterURL(s *corev1.Service, port int32) string {
	return fmt.Sprintf("http://%s/", net.JoinHostPort(s.Spec.ClusterIP, fmt.Sprint(port)))
}

func nodeURL(i int, port int32) string {
	return fmt.Sprintf("http://%s/", net.JoinHostPort(topology.NodeAddr(i).String(), fmt.Sprint(port)))
}

// answered fails the test unless every hit was answered, and returns the pods that
// answered and the client IPs they saw.
func answered(t *testing.T, what string, hits []lab.Hit) (pods, clients map[string]int) {
	t.Helper()
	pods, clients = map[string]int{}, map[string]int{}
	for i, h := range hits {
		if h.Err != nil {
			t.Fatalf("%s: request %d of %d failed: %v", what, i+1, len(hits), h.Err)
		}
		pods[h.Reply.Pod]++
		clients[h.ClientIP()]++
	}
	return pods, clients
}

func onlyKeys(m map[string]int, allowed ...string) error {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for k := range m {
		if !ok[k] {
			return fmt.Errorf("unexpected %q in %v (want only %v)", k, m, allowed)
		}
	}
	return nil
}

// suite runs every scenario on one lab.
func suite(t *testing.T, controlPlane string) {
	e := newEnv(t, controlPlane)
	web := e.service("web")
	webPods := []string{"web-1", "web-2", "web-3"}
	// The proxies program what was applied within their min-sync-period, and
	// the pods become endpoints one by one as they turn ready: wait until every
	// node's proxy sends to all of web's pods before any scenario runs (a
	// proxy that programmed the first endpoint and has the others waiting
	// behind its min-sync-period answers, but from one pod only).
	for _, from := range []string{"client-1", "web-2", "client-3"} {
		e.eventually("web answers "+from+" from each of its pods", func() error {
			seen := map[string]bool{}
			for _, h := range e.curl(from, clusterURL(web, 80), 15, time.Second) {
				if h.Err != nil {
					return h.Err
				}
				seen[h.Reply.Pod] = true
			}
			for _, p := range webPods {
				if !seen[p] {
					return fmt.Errorf("no answer from %s yet (answered: %v)", p, seen)
				}
			}
			return nil
		})
	}

	t.Run("ClusterIPFromEveryNode", func(t *testing.T) {
		for _, from := range []string{"client-1", "web-2", "client-3"} {
			pods, _ := answered(t, from, e.curl(from, clusterURL(web, 80), 15, 2*time.Second))
			if err := onlyKeys(pods, webPods...); err != nil {
				t.Fatalf("from %s: %v", from, err)
			}
			if len(pods) < 2 {
				t.Fatalf("from %s: 15 requests all went to %v; want them spread", from, pods)
			}
		}
	})
	t.Run("DNS", func(t *testing.T) { dnsScenarios(t, e) })
	t.Run("TraceVerify", func(t *testing.T) { traceScenarios(t, e) })
	t.Run("TraceCommand", func(t *testing.T) { traceCommand(t, e) })
	if e.l.DataPlane() == cluster.DataPlaneEBPF {
		t.Run("TraceMaglev", func(t *testing.T) { maglevTrace(t, e) })
	}
	t.Run("EgressMasquerade", func(t *testing.T) { egressScenarios(t, e) })
	t.Run("LoadBalancer", func(t *testing.T) { lbScenarios(t, e) })
	t.Run("Why", func(t *testing.T) { whyScenarios(t, e) })

	t.Run("Multiport", func(t *testing.T) {
		for _, port := range []int32{80, 8080} {
			for _, h := range e.curl("client-1", clusterURL(web, port), 4, 2*time.Second) {
				if h.Err != nil {
					t.Fatalf("port %d: %v", port, h.Err)
				}
				if _, p, _ := net.SplitHostPort(h.Reply.Server); p != fmt.Sprint(port) {
					t.Fatalf("port %d: served on %s", port, h.Reply.Server)
				}
			}
		}
	})
	t.Run("SamePortTCPAndUDP", func(t *testing.T) {
		dns := e.service("dns")
		addr := net.JoinHostPort(dns.Spec.ClusterIP, "53")
		dial := e.dialer("client-1")
		u, err := echo.UDP(e.ctx, dial, addr, "hostname")
		if err != nil {
			t.Fatalf("UDP %s: %v", addr, err)
		}
		tc, err := echo.TCPLine(e.ctx, dial, addr, "hostname")
		if err != nil {
			t.Fatalf("TCP %s: %v", addr, err)
		}
		for _, got := range []string{u, tc} {
			if err := onlyKeys(map[string]int{got: 1}, webPods...); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("NodePortOnEveryNode", func(t *testing.T) {
		np := e.service("web-np").Spec.Ports[0].NodePort
		for i := 1; i <= 3; i++ {
			pods, clients := answered(t, fmt.Sprintf("node%d", i), e.curl("client", nodeURL(i, np), 6, 2*time.Second))
			if err := onlyKeys(pods, webPods...); err != nil {
				t.Fatal(err)
			}
			if clients[topology.ClientAddr.String()] > 0 {
				t.Fatalf("node%d: externalTrafficPolicy Cluster must masquerade, but pods saw the client %s: %v", i, topology.ClientAddr, clients)
			}
		}
	})
	t.Run("ExternalIP", func(t *testing.T) {
		// The network routes the external IP to node1, as a router would.
		if out, err := e.l.Command(e.place("client"), "ip", "route", "replace", "203.0.113.10/32", "via", topology.NodeAddr(1).String()).CombinedOutput(); err != nil {
			t.Fatalf("route: %v: %s", err, out)
		}
		pods, _ := answered(t, "external IP", e.curl("client", "http://203.0.113.10/", 6, 2*time.Second))
		if err := onlyKeys(pods, webPods...); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("SessionAffinity", func(t *testing.T) {
		sticky := e.service("web-sticky")
		for _, from := range []string{"client-1", "client-3"} {
			pods, _ := answered(t, from, e.curl(from, clusterURL(sticky, 80), 10, 2*time.Second))
			if len(pods) != 1 {
				t.Fatalf("from %s: ClientIP affinity, but answered by %v", from, pods)
			}
		}
	})
	t.Run("ExternalTrafficPolicyLocal", func(t *testing.T) {
		np := e.service("local-etp").Spec.Ports[0].NodePort
		pods, clients := answered(t, "node2", e.curl("client", nodeURL(2, np), 5, 2*time.Second))
		if err := onlyKeys(pods, "local-2"); err != nil {
			t.Fatal(err)
		}
		if err := onlyKeys(clients, localPolicyClient(2)); err != nil {
			t.Fatalf("client address not kept: %v", err)
		}
		for _, i := range []int{1, 3} {
			for _, h := range e.curl("client", nodeURL(i, np), 2, time.Second) {
				if h.Err == nil {
					t.Fatalf("node%d has no local endpoint but answered (pod %s)", i, h.Reply.Pod)
				}
			}
		}
	})
	t.Run("HealthCheckNodePort", func(t *testing.T) {
		hc := e.service("local-etp").Spec.HealthCheckNodePort
		if hc == 0 {
			t.Fatal("local-etp has no healthCheckNodePort")
		}
		for i, want := range map[int]int{1: http.StatusServiceUnavailable, 2: http.StatusOK, 3: http.StatusServiceUnavailable} {
			code, body, err := e.l.HTTPGet(e.ctx, e.place("client"), nodeURL(i, hc))
			if err != nil || code != want {
				t.Fatalf("node%d healthCheckNodePort %d: %d %q %v; want %d", i, hc, code, body, err, want)
			}
		}
	})
	t.Run("InternalTrafficPolicyLocal", func(t *testing.T) {
		itp := e.service("local-itp")
		pods, _ := answered(t, "from node2", e.curl("solo", clusterURL(itp, 80), 5, 2*time.Second))
		if err := onlyKeys(pods, "local-2"); err != nil {
			t.Fatal(err)
		}
		for _, h := range e.curl("client-1", clusterURL(itp, 80), 2, time.Second) {
			if h.Err == nil {
				t.Fatalf("node1 has no local endpoint but %s answered", h.Reply.Pod)
			}
		}
	})
	t.Run("NoEndpointsRefused", func(t *testing.T) {
		empty := e.service("empty")
		start := time.Now()
		h := e.curl("client-1", clusterURL(empty, 80), 1, 5*time.Second)[0]
		if !errors.Is(h.Err, syscall.ECONNREFUSED) {
			t.Fatalf("want connection refused, got %v", h.Err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("refusal took %v; want it at once", d)
		}
	})
	t.Run("Hairpin", func(t *testing.T) {
		pods, _ := answered(t, "hairpin", e.curl("solo", clusterURL(e.service("solo"), 80), 5, 2*time.Second))
		if err := onlyKeys(pods, "solo"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("HostPort", func(t *testing.T) {
		url := fmt.Sprintf("http://%s:8081/", topology.NodeAddr(1))
		for _, from := range []string{"client", "client-3", "client-1", "hostport"} {
			pods, _ := answered(t, "hostPort from "+from, e.curl(from, url, 2, 2*time.Second))
			if err := onlyKeys(pods, "hostport"); err != nil {
				t.Fatalf("from %s: %v", from, err)
			}
		}
	})
	t.Run("CrossNodePodToPod", func(t *testing.T) {
		web3 := e.pod("web-3")
		c1 := e.pod("client-1")
		pods, clients := answered(t, "pod to pod", e.curl("client-1", fmt.Sprintf("http://%s/", web3.Status.PodIP), 3, 2*time.Second))
		if err := onlyKeys(pods, "web-3"); err != nil {
			t.Fatal(err)
		}
		if err := onlyKeys(clients, c1.Status.PodIP); err != nil {
			t.Fatalf("pod to pod traffic was NATed: %v", err)
		}
	})
	t.Run("PodDeletedTrafficMoves", func(t *testing.T) {
		url := clusterURL(e.service("moving"), 80)
		dial := e.dialer("client-1")
		stop := make(chan struct{})
		var mu sync.Mutex
		var failures []error
		seen := map[string]int{}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ { // bounded: about 40 s at most
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
				r, err := echo.Get(ctx, dial, url)
				cancel()
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					seen[r.Pod]++
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(500 * time.Millisecond)
		if err := e.l.Delete(e.ctx, "Pod", "default", "moving-a", 2*time.Second); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		mu.Lock()
		clear(seen)
		mu.Unlock()
		time.Sleep(time.Second)
		close(stop)
		wg.Wait()
		if len(failures) > 0 {
			t.Fatalf("%d request(s) failed while moving-a was deleted: %v", len(failures), failures)
		}
		if err := onlyKeys(seen, "moving-b", "moving-c"); err != nil {
			t.Fatalf("after the delete: %v", err)
		}
	})
	t.Run("InvalidPodsRefusedWhole", func(t *testing.T) { invalidPodScenarios(t, e) })
	t.Run("UDPToReplacedBackend", func(t *testing.T) {
		svc := e.service("udp-replace")
		addr := net.JoinHostPort(svc.Spec.ClusterIP, "53")
		c, err := e.dialer("client-1")(e.ctx, "udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ask := func() (string, error) {
			if _, err := c.Write([]byte("hostname")); err != nil {
				return "", err
			}
			_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			b := make([]byte, 512)
			n, err := c.Read(b)
			return string(b[:n]), err
		}
		e.eventually("udpr-1 answers", func() error {
			got, err := ask()
			if err == nil && got != "udpr-1" {
				err = fmt.Errorf("answered by %q", got)
			}
			return err
		})
		replacement := e.pod("udpr-1").DeepCopy()
		replacement.Name, replacement.Spec.NodeName = "udpr-2", "node3"
		replacement.ResourceVersion, replacement.UID, replacement.Status = "", "", corev1.PodStatus{}
		e.applyObjects(controlplane.Object{Origin: "test", Obj: replacement})
		if err := e.l.Delete(e.ctx, "Pod", "default", "udpr-1", time.Second); err != nil {
			t.Fatal(err)
		}
		// The same socket (the same conntrack flow) must reach the new backend: the
		// proxy clears the stale UDP flow to the deleted one.
		e.eventually("udpr-2 answers on the same flow", func() error {
			got, err := ask()
			if err == nil && got != "udpr-2" {
				err = fmt.Errorf("answered by %q", got)
			}
			return err
		})
	})
	if controlPlane == cluster.ControlPlaneFile {
		t.Run("AgentsFollowJournal", func(t *testing.T) { agentsFollowJournal(t, e) })
	}
}

func TestServicesFileControlPlane(t *testing.T) { suite(t, cluster.ControlPlaneFile) }

// The same suite on a real kube-apiserver and kube-controller-manager: the lab
// registers Nodes and reports Pod status as kubelets do; EndpointSlices come from
// the controller manager.
func TestServicesKubeControlPlane(t *testing.T) {
	requireKubeTier(t)
	suite(t, cluster.ControlPlaneKube)
}

// requireKubeTier applies the house rule for the kube tier: root, and
// $SVCNET_K8S_BIN naming the Kubernetes binaries; skip only when
// SVCNET_REQUIRE_ROOT is unset.
func requireKubeTier(t *testing.T) {
	t.Helper()
	netnstest.RequireRoot(t)
	if os.Getenv(kubetest.EnvK8sBin) == "" {
		if os.Getenv(netnstest.EnvRequireRoot) == "" {
			t.Skipf("kube tier: %s unset (make test sets it)", kubetest.EnvK8sBin)
		}
		t.Fatalf("kube tier: %s unset: it must name the directory of kube-apiserver, kube-controller-manager and kube-proxy (tools/k8s/build.sh prints it)", kubetest.EnvK8sBin)
	}
}

// localPolicyClient is the address a pod on node sees for the external
// client under externalTrafficPolicy Local: the client's own, except on
// the userspace plane, whose proxy connects to the pod itself (the pod
// sees node's bridge address: no plane proxying in user space keeps it).
func localPolicyClient(node int) string {
	if testbin.DataPlane() == "userspace" {
		return topology.Gateway4(node).String()
	}
	return topology.ClientAddr.String()
}

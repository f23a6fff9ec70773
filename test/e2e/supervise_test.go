package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbin"

	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/trace"
)

// Supervision (cluster.Supervise): every process of the lab is restarted when it
// exits, as a kubelet restarts the containers of its Pods, and shows its
// restarts in `lab get pods`; a node whose proxy's /healthz fails is NotReady.
// Each case runs on a 2-node lab of its own per control plane, driven as a
// user drives it: the lab's handle lets go of the lock (the supervisors post
// statuses under it), and `svcnet lab get` and `lab apply` run as commands.
func TestSupervisedFileControlPlane(t *testing.T) { supervision(t, cluster.ControlPlaneFile) }

func TestSupervisedKubeControlPlane(t *testing.T) {
	requireKubeTier(t)
	supervision(t, cluster.ControlPlaneKube)
}

// Bounds of the supervision cases.
const (
	restartBound  = time.Second      // kill -9 to a new process
	postBound     = 15 * time.Second // a restart or readiness to show in `lab get`
	notReadyBound = 15 * time.Second // a failing /healthz to a NotReady node
)

func supervision(t *testing.T, controlPlane string) {
	netnstest.RequireRoot(t)
	before := netnstest.HostNetworkState(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	name := labtest.Name("sup") + "-" + controlPlane
	l := labtest.Up(t, ctx, lab.Options{Name: name, Nodes: 2, ControlPlane: controlPlane, Binary: svcnetBin,
		Progress: testWriter{t}}, "supervise.yaml")
	e := &env{t: t, ctx: ctx, l: l}
	web := e.service("web")
	np := web.Spec.Ports[0].NodePort
	lbIP := e.lbIP("web")
	for i := 1; i <= 2; i++ {
		from := fmt.Sprintf("client-%d", i)
		e.eventually("web from "+from, func() error { return e.curl(from, clusterURL(web, 80), 1, time.Second)[0].Err })
		e.eventually(fmt.Sprintf("NodePort on node%d", i), func() error { return e.curl("client", nodeURL(i, np), 1, time.Second)[0].Err })
	}
	lbURL := fmt.Sprintf("http://%s/", netip.AddrPortFrom(lbIP, 80))
	e.eventually("LoadBalancer IP", func() error { return e.curl("client", lbURL, 1, time.Second)[0].Err })
	// The node whose proxy dies is the one announcing the LoadBalancer IP, so
	// that the client's traffic to that IP crosses it too.
	node, err := l.Announcer(lbIP)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node%d announces %s: its proxy is the one killed", node, lbIP)
	l.Close() // let the supervisors post statuses

	t.Run("ProxyKilled", func(t *testing.T) { proxyKilled(t, e, node, lbIP) })
	t.Run("ProxyHealthzFails", func(t *testing.T) { proxyHealthzFails(t, e, node) })
	t.Run("PodServerKilled", func(t *testing.T) { podServerKilled(t, e, node) })
	t.Run("ClusterDNSKilled", func(t *testing.T) { clusterDNSKilled(t, e) })
	if controlPlane == cluster.ControlPlaneKube {
		t.Run("LBControllerKilled", func(t *testing.T) { lbControllerKilled(t, e) })
	} else {
		t.Run("ControlPlaneKilled", func(t *testing.T) { controlPlaneKilled(t, e) })
	}
	t.Run("SupervisorKilled", func(t *testing.T) { supervisorKilled(t, e, node) })
	if t.Failed() {
		labtest.KeepLogs(t, name) // before DownLeavesNothing takes the lab down
	}
	t.Run("DownLeavesNothing", func(t *testing.T) { downLeavesNothing(t, e, before) })
}

// killSupervised kills Pod namespace/name's process with SIGKILL and returns
// the new process its supervisor started, failing t unless that took less
// than restartBound.
func killSupervised(t *testing.T, e *env, namespace, name string) (old, restarted int) {
	t.Helper()
	old, err := e.l.SupervisedPid(namespace, name)
	if err != nil || old == 0 {
		t.Fatalf("Pod %s/%s: no process: %v", namespace, name, err)
	}
	killed := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := killed.Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if p, err := e.l.SupervisedPid(namespace, name); err == nil && p != 0 && p != old {
			took := time.Since(killed)
			t.Logf("Pod %s/%s: kill -9 of pid %d; pid %d runs %v later", namespace, name, old, p, took.Round(time.Millisecond))
			if took > restartBound {
				t.Errorf("Pod %s/%s: restarted after %v, want under %v", namespace, name, took, restartBound)
			}
			return old, p
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("Pod %s/%s: not restarted within 10s of kill -9", namespace, name)
	return 0, 0
}

// proxyKilled: kill -9 of node's svcnet proxy while clients talk through the
// node; the proxy is back in under a second, no request through the node's
// NodePort, ClusterIP or LoadBalancer IP fails (on connections established
// before the kill and on new ones: the restarted speaker keeps its IPs within
// its restart grace, and the node's data plane served on meanwhile), the IP
// never leaves the node, `lab get pods` shows the restart, and a Service
// applied afterwards is served on the node.
func proxyKilled(t *testing.T, e *env, node int, lbIP netip.Addr) {
	svc := e.service("web")
	np := svc.Spec.Ports[0].NodePort
	client, clientK := e.dialer("client"), e.dialer(fmt.Sprintf("client-%d", node))
	nodePort := netip.AddrPortFrom(topology.NodeAddr(node), uint16(np)).String()
	clusterIP := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	lb := netip.AddrPortFrom(lbIP, 80).String()
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	flows := []*flow{
		{name: "NodePort, established", dial: client, addr: nodePort, established: true, must: true, outside: true},
		{name: "NodePort, new connections", dial: client, addr: nodePort, must: true, outside: true},
		{name: "ClusterIP from a pod on the node, established", dial: clientK, addr: clusterIP, established: true, must: true},
		{name: "ClusterIP from a pod on the node, new connections", dial: clientK, addr: clusterIP, must: true},
		{name: "LoadBalancer IP, established", dial: client, addr: lb, established: true, must: true, outside: true},
		{name: "LoadBalancer IP, new connections", dial: client, addr: lb, must: true, outside: true},
	}
	var wg sync.WaitGroup
	for _, f := range flows {
		if err := f.open(ctx); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		wg.Go(func() { f.run(ctx) })
	}
	time.Sleep(500 * time.Millisecond)
	held := tcConns(t, e, node, flows)
	killedAt := time.Now()
	killSupervised(t, e, "kube-system", fmt.Sprintf("svcnet-proxy-node%d", node))
	if err := e.l.StartProxy(e.ctx, node); err != nil { // supervised: waits until it has synced
		t.Fatalf("node%d's proxy after the restart: %v", node, err)
	}
	syncedAt := time.Now()
	t.Logf("node%d's proxy synced again %v after the kill", node, syncedAt.Sub(killedAt).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	heldAfter := tcConns(t, e, node, flows) // before the flows end their connections
	stop()
	wg.Wait()
	for _, f := range flows {
		c, ok := held[f]
		if !ok {
			continue
		}
		// The restarted proxy adopted the connection table.
		t.Logf("%s: node%d's tc connection %s before the kill, %s after", f.name, node, c, heldAfter[f])
		if c != heldAfter[f] && !strings.HasPrefix(c, "none") {
			t.Errorf("%s: node%d's tc load balancer held the connection as %s before the kill, as %s after", f.name, node, c, heldAfter[f])
		}
	}
	for _, f := range flows {
		t.Logf("%s: %s", f.name, f.summary(killedAt))
		if testbin.DataPlane() == "userspace" {
			userspaceRestart(t, f, node, killedAt, syncedAt)
			continue
		}
		if f.must && (f.failed > 0 || f.ok == 0) {
			t.Errorf("%s through node%d: %s; want no failure", f.name, node, f.summary(killedAt))
		}
	}
	if n, err := e.l.Announcer(lbIP); err != nil || n != node {
		t.Errorf("after the restart %s is announced by node%d (%v), want node%d still", lbIP, n, err, node)
	}

	row := waitRow(t, e, "pods", "kube-system", fmt.Sprintf("svcnet-proxy-node%d", node), func(r []string) bool {
		return r[1] == "1/1" && r[2] == "Running" && strings.HasPrefix(r[3], "1 (")
	})
	t.Logf("lab get pods -n kube-system: %s", strings.Join(row, "  "))

	// A Service applied after the restart is programmed on the node.
	manifest := filepath.Join(t.TempDir(), "after.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: after}\nspec:\n  type: NodePort\n  selector: {app: web}\n  ports: [{port: 8080, targetPort: 80}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	labCLI(t, e, "apply", "-f", manifest)
	after := e.service("after")
	anp := after.Spec.Ports[0].NodePort
	e.eventually(fmt.Sprintf("Service after on node%d's NodePort %d", node, anp), func() error {
		return e.curl("client", nodeURL(node, anp), 1, time.Second)[0].Err
	})
	e.eventually(fmt.Sprintf("Service after's ClusterIP from client-%d", node), func() error {
		return e.curl(fmt.Sprintf("client-%d", node), clusterURL(after, 8080), 1, time.Second)[0].Err
	})
}

// tcConns returns, on the eBPF plane, how node's tc load balancer holds
// each established flow from outside the cluster: its backend, SNAT and
// state, or none (the nftables rules keep it).
func tcConns(t *testing.T, e *env, node int, flows []*flow) map[*flow]string {
	t.Helper()
	if testbin.DataPlane() != cluster.DataPlaneEBPF {
		return nil
	}
	open := trace.KernelTCMaps(func(string) (string, error) { return e.l.Names().Node(node), nil })
	m, err := open(topology.NodeName(node), "eth0")
	if err != nil {
		t.Fatalf("node%d's tc load balancer: %v", node, err)
	}
	defer m.Close()
	out := map[*flow]string{}
	for _, f := range flows {
		if !f.established || !f.outside {
			continue
		}
		client, err1 := netip.ParseAddrPort(f.conn.LocalAddr().String())
		fe, err2 := netip.ParseAddrPort(f.addr)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: addresses %v, %v", f.name, f.conn.LocalAddr(), f.addr)
		}
		c, found, err := m.Conn(client, fe, model.ProtocolTCP)
		switch {
		case err != nil:
			out[f] = "unreadable: " + err.Error()
		case !found:
			out[f] = fmt.Sprintf("none for %v -> %v", client, fe)
		default:
			out[f] = fmt.Sprintf("%+v", c)
		}
	}
	return out
}

// proxyHealthzFails: SIGSTOP of node's proxy makes its /healthz time out:
// `lab get nodes` says NotReady within notReadyBound, and Ready again once
// SIGCONT lets it answer.
func proxyHealthzFails(t *testing.T, e *env, node int) {
	pid, err := e.l.ProxyPid(node)
	if err != nil || pid == 0 {
		t.Fatalf("node%d's proxy: %v", node, err)
	}
	nodeName := topology.NodeName(node)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	waitRowWithin(t, e, notReadyBound, "nodes", "", nodeName, func(r []string) bool { return r[1] == "NotReady" })
	t.Logf("%s NotReady %v after SIGSTOP of its proxy", nodeName, time.Since(stopped).Round(time.Millisecond))
	resume()
	cont := time.Now()
	waitRowWithin(t, e, notReadyBound, "nodes", "", nodeName, func(r []string) bool { return r[1] == "Ready" })
	t.Logf("%s Ready %v after SIGCONT", nodeName, time.Since(cont).Round(time.Millisecond))
	if p, _ := e.l.ProxyPid(node); p != pid {
		t.Errorf("node%d's proxy is pid %d after SIGSTOP and SIGCONT, want the same %d (a stopped process has not exited)", node, p, pid)
	}
}

// podServerKilled: kill -9 of a pod's server; it is back in under a second,
// `lab get pods` shows RESTARTS 1 and the pod ready, and it answers again.
func podServerKilled(t *testing.T, e *env, node int) {
	pod := fmt.Sprintf("web-%d", node)
	killSupervised(t, e, "default", pod)
	row := waitRow(t, e, "pods", "default", pod, func(r []string) bool {
		return r[1] == "1/1" && r[2] == "Running" && strings.HasPrefix(r[3], "1 (")
	})
	t.Logf("lab get pods: %s", strings.Join(row, "  "))
	ip := e.pod(pod).Status.PodIP
	e.eventually(pod+" answers again", func() error {
		h := e.curl("client-1", fmt.Sprintf("http://%s/", net.JoinHostPort(ip, "80")), 1, time.Second)[0]
		if h.Err == nil && h.Reply.Pod != pod {
			return fmt.Errorf("answered by %s", h.Reply.Pod)
		}
		return h.Err
	})
}

// clusterDNSKilled: kill -9 of svcnet dns; it is back, shows RESTARTS 1, and
// pods resolve names again.
func clusterDNSKilled(t *testing.T, e *env) {
	killSupervised(t, e, lab.DNSNamespace, lab.DNSPod)
	waitRow(t, e, "pods", lab.DNSNamespace, lab.DNSPod, func(r []string) bool {
		return r[1] == "1/1" && strings.HasPrefix(r[3], "1 (")
	})
	want := e.service("web").Spec.ClusterIP
	e.eventually("client-1 resolves web", func() error {
		r := e.resolve(t, "client-1", "web")
		if r.code != 0 || len(r.lines) != 1 || r.lines[0] != want {
			return fmt.Errorf("svcnet resolve web: %v (exit %d): %s", r.lines, r.code, r.stderr)
		}
		return nil
	})
}

// lbControllerKilled: kill -9 of svcnet lb controller; it is back, shows
// RESTARTS 1, and gives a LoadBalancer Service applied afterwards its IP.
func lbControllerKilled(t *testing.T, e *env) {
	killSupervised(t, e, "kube-system", cluster.LBControllerPod)
	waitRow(t, e, "pods", "kube-system", cluster.LBControllerPod, func(r []string) bool {
		return r[1] == "1/1" && strings.HasPrefix(r[3], "1 (")
	})
	manifest := filepath.Join(t.TempDir(), "lb-after.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: lb-after}\nspec:\n  type: LoadBalancer\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 80}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	labCLI(t, e, "apply", "-f", manifest)
	ip := e.lbIP("lb-after")
	if !lab.InPool(ip) {
		t.Fatalf("lb-after got %s, outside the pool", ip)
	}
}

// controlPlaneKilled: kill -9 of the embedded control plane's daemon; it
// is back, shows RESTARTS 1, and serves the next apply.
func controlPlaneKilled(t *testing.T, e *env) {
	_, restarted := killSupervised(t, e, "kube-system", cluster.ControlPlanePod)
	waitRow(t, e, "pods", "kube-system", cluster.ControlPlanePod, func(r []string) bool {
		return r[1] == "1/1" && r[2] == "Running" && strings.HasPrefix(r[3], "1 (")
	})
	// The apply is the daemon's once it listens (without one, lab apply
	// makes the change itself).
	e.eventually("the restarted daemon listens", func() error {
		c, err := net.Dial("unix", cluster.ControlPlaneSocket(e.l.Names()))
		if err == nil {
			c.Close()
		}
		return err
	})
	manifest := filepath.Join(t.TempDir(), "after-cp.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: after-cp}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 80}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	labCLI(t, e, "apply", "-f", manifest)
	if ip := e.service("after-cp").Spec.ClusterIP; ip == "" {
		t.Fatal("after-cp has no ClusterIP")
	}
	log, err := os.ReadFile(e.l.Names().Path("logs", "control-plane.log"))
	if err != nil {
		t.Fatal(err)
	}
	served := regexp.MustCompile(fmt.Sprintf(`(?m) %d cpserve\.go:\d+\] "Control-plane request" logger="control-plane" op="apply" objects=1 errors=0 `, restarted))
	if !served.Match(log) {
		t.Errorf("the restarted daemon (pid %d) did not serve the apply:\n%s", restarted, log)
	}
}

// supervisorKilled: kill -9 of node's proxy's supervisor is a killed kubelet:
// the proxy runs on, unsupervised. Lab.StartProxy supervises it again.
func supervisorKilled(t *testing.T, e *env, node int) {
	podName := fmt.Sprintf("svcnet-proxy-node%d", node)
	sup, err := e.l.SupervisorPid("kube-system", podName)
	if err != nil {
		t.Fatal(err)
	}
	proxy, _ := e.l.ProxyPid(node)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if p, _ := e.l.ProxyPid(node); p != proxy || proxy == 0 {
		t.Fatalf("node%d's proxy is %d 2s after its supervisor was killed, want %d running on", node, p, proxy)
	}
	if _, err := e.l.SupervisorPid("kube-system", podName); err == nil {
		t.Fatal("a supervisor runs again after kill -9 of the supervisor; nothing restarts a killed kubelet")
	}
	l, err := lab.Open(e.ctx, e.l.Names().Lab)
	if err != nil {
		t.Fatal(err)
	}
	err = l.StartProxy(e.ctx, node)
	l.Close()
	if err != nil {
		t.Fatalf("StartProxy after the supervisor's death: %v", err)
	}
	if _, err := e.l.SupervisorPid("kube-system", podName); err != nil {
		t.Fatalf("after StartProxy: %v", err)
	}
	killSupervised(t, e, "kube-system", podName)
}

// downLeavesNothing: `lab down` just after a kill -9 (its restart in flight)
// leaves no namespace, no process, no state, and the host as it was.
func downLeavesNothing(t *testing.T, e *env, before string) {
	name := e.l.Names().Lab
	pids := labPids(t, name)
	victim, err := e.l.SupervisedPid("default", "web-1")
	if err != nil || victim == 0 {
		t.Fatalf("web-1: %v", err)
	}
	_ = syscall.Kill(victim, syscall.SIGKILL)
	if err := lab.Down(name); err != nil {
		t.Fatalf("lab down: %v", err)
	}
	checkLabGone(t, name, pids)
	if left := processesOf(svcnetBin); len(left) > 0 {
		t.Errorf("processes of the lab's binary left after lab down: %v", left)
	}
	if _, err := os.Stat(e.l.Names().Dir()); err == nil {
		t.Errorf("%s left after lab down", e.l.Names().Dir())
	}
	if after := netnstest.HostNetworkState(t); after != before {
		t.Errorf("the host's network state changed:\n--- before\n%s\n--- after\n%s", before, after)
	}
}

// processesOf returns the live processes running bin.
func processesOf(bin string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || !running(pid) {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", en.Name(), "exe")); err == nil && exe == bin {
			out = append(out, pid)
		}
	}
	return out
}

// flow is one kind of request through a path, made every flowInterval while
// a case runs: on one connection established before (the echo line
// protocol's "echo N"), or each on a new connection ("hostname").
type flow struct {
	name        string
	dial        echo.DialFunc
	addr        string
	established bool
	must        bool // every request must succeed
	outside     bool // from outside the cluster, through the node's interface

	conn     net.Conn
	ok       int
	failed   int
	firstErr error
	firstAt  time.Time
	// lastAt is when the last request failed; okAfter counts the requests
	// that succeeded after it.
	lastAt  time.Time
	okAfter int
	// failures are the first failuresKept failed requests.
	failures []failure
}

// failure is one failed request: when it began and ended, and its error.
type failure struct {
	began, ended time.Time
	err          error
}

const failuresKept = 10

const (
	flowInterval = 20 * time.Millisecond
	flowTimeout  = time.Second
	flowMax      = 5000 // requests per flow at most
)

func (f *flow) open(ctx context.Context) error {
	if !f.established {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := f.dial(ctx, "tcp", f.addr)
	if err != nil {
		return err
	}
	f.conn = c
	return nil
}

// run makes requests until ctx ends (or flowMax); a failed request on the
// established connection ends it.
func (f *flow) run(ctx context.Context) {
	var r *bufio.Reader
	if f.conn != nil {
		defer f.conn.Close()
		r = bufio.NewReader(f.conn)
	}
	for n := 0; n < flowMax && ctx.Err() == nil; n++ {
		var err error
		began := time.Now()
		if f.established {
			err = askLine(f.conn, r, n)
		} else {
			rctx, cancel := context.WithTimeout(ctx, flowTimeout)
			_, err = echo.TCPLine(rctx, f.dial, f.addr, "hostname")
			cancel()
			if ctx.Err() != nil {
				return // cut off by the end, not failed
			}
		}
		if err == nil {
			f.ok++
			f.okAfter++
		} else {
			f.failed++
			f.lastAt, f.okAfter = time.Now(), 0
			if len(f.failures) < failuresKept {
				f.failures = append(f.failures, failure{began, f.lastAt, err})
			}
			if f.firstErr == nil {
				f.firstErr, f.firstAt = err, time.Now()
			}
			if f.established {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(flowInterval):
		}
	}
}

// askLine sends "echo n" on c and checks that n comes back within flowTimeout.
func askLine(c net.Conn, r *bufio.Reader, n int) error {
	_ = c.SetDeadline(time.Now().Add(flowTimeout))
	if _, err := fmt.Fprintf(c, "echo %d\n", n); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if got = strings.TrimSuffix(got, "\n"); got != strconv.Itoa(n) {
		return fmt.Errorf("got %q for echo %d", got, n)
	}
	return nil
}

// userspaceRestart checks what the userspace plane guarantees across a
// killed proxy, which is less than the kernel planes' "no failure": the
// proxied connections are the proxy's own sockets and end with its
// process (an established flow fails once, at the kill), and while no
// process listens on the proxy ports new connections are refused; from
// the restarted proxy's first sync on, every request succeeds again.
func userspaceRestart(t *testing.T, f *flow, node int, killedAt, syncedAt time.Time) {
	t.Helper()
	switch {
	case f.ok == 0 || f.okAfter == 0 && !f.established:
		t.Errorf("%s through node%d on userspace: %s; want requests to succeed after the restart", f.name, node, f.summary(killedAt))
	case f.failed > 0 && (f.firstAt.Before(killedAt) || f.lastAt.After(syncedAt.Add(500*time.Millisecond))):
		t.Errorf("%s through node%d on userspace: %s, last failure %v after the kill; want failures only between the kill and the restarted proxy's sync (%v after it)",
			f.name, node, f.summary(killedAt), f.lastAt.Sub(killedAt).Round(time.Millisecond), syncedAt.Sub(killedAt).Round(time.Millisecond))
	case f.established && f.failed > 1:
		t.Errorf("%s through node%d on userspace: %s; want the connection to end once, at the kill", f.name, node, f.summary(killedAt))
	}
}

func (f *flow) summary(killed time.Time) string {
	s := fmt.Sprintf("%d requests, %d failed", f.ok+f.failed, f.failed)
	if len(f.failures) > 0 {
		x := f.failures[0]
		s += fmt.Sprintf(" (first %v–%v after the kill: %v", x.began.Sub(killed).Round(time.Millisecond), x.ended.Sub(killed).Round(time.Millisecond), x.err)
		if f.established {
			s += "; the connection was given up"
		}
		s += ")"
	}
	for _, x := range f.failures[min(1, len(f.failures)):] {
		s += fmt.Sprintf("; then %v–%v after the kill: %v", x.began.Sub(killed).Round(time.Millisecond), x.ended.Sub(killed).Round(time.Millisecond), x.err)
	}
	return s
}

// labCLI runs `svcnet lab ARGS --name LAB` and returns its output, failing t
// when it fails.
func labCLI(t *testing.T, e *env, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, svcnetBin, append(append([]string{"lab"}, args...), "--name", e.l.Names().Lab)...).CombinedOutput()
	if err != nil {
		t.Fatalf("svcnet lab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cells separates a table row's cells (at least two spaces).
var cells = regexp.MustCompile(`  +`)

// getRow returns the cells of the row of name in `svcnet lab get RESOURCE
// [-n namespace]`, or nil.
func getRow(t *testing.T, e *env, resource, namespace, name string) []string {
	t.Helper()
	args := []string{"get", resource}
	if namespace != "" {
		args = append(args, "-n", namespace)
	}
	for _, line := range strings.Split(labCLI(t, e, args...), "\n") {
		if r := cells.Split(strings.TrimSpace(line), -1); len(r) >= 4 && r[0] == name {
			return r
		}
	}
	return nil
}

// waitRow waits up to postBound until name's row in `svcnet lab get` passes ok.
func waitRow(t *testing.T, e *env, resource, namespace, name string, ok func([]string) bool) []string {
	t.Helper()
	return waitRowWithin(t, e, postBound, resource, namespace, name, ok)
}

func waitRowWithin(t *testing.T, e *env, limit time.Duration, resource, namespace, name string, ok func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(limit)
	var r []string
	for {
		if r = getRow(t, e, resource, namespace, name); r != nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("svcnet lab get %s: %s is %q after %v", resource, name, r, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

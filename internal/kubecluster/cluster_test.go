package kubecluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// The lab's addresses: the control plane's on the node network, and a node's.
const (
	apiAddr   = "172.26.236.176"
	nodeAddr  = "172.26.236.177"
	serverURL = "https://" + apiAddr + ":6443"
)

// starterEnv, when set (to a JSON starterSpec), makes the test binary act as a
// CLI invocation that starts a detached cluster and exits (see TestMain).
const starterEnv = "KUBECLUSTER_TEST_STARTER"

type starterSpec struct {
	Dir, BinDir, EtcdBin, NS string
}

// starterResult is what the starter prints on stdout.
type starterResult struct {
	ClusterIP string
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(starterEnv); spec != "" {
		if err := runStarter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "starter:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// labOptions are the options the lab uses: fixed ports, processes inside cp,
// reached through a dialer into cp, the apiserver on every address of cp.
func labOptions(s starterSpec, cp *netns.NS) kubecluster.Options {
	return kubecluster.Options{
		Dir: s.Dir, BinDir: s.BinDir, EtcdBin: s.EtcdBin,
		ControllerManager: true,
		AdvertiseAddress:  apiAddr,
		BindAddress:       "0.0.0.0",
		Ports:             kubecluster.DefaultPorts,
		Command: func(name string, args ...string) *exec.Cmd {
			return cp.Command(append([]string{name}, args...)...)
		},
		Detach:       true,
		Dial:         netns.Dialer(cp),
		ServerURL:    serverURL,
		ReadyTimeout: 90 * time.Second,
	}
}

// runStarter starts a detached cluster in the namespace spec names, creates a
// Namespace and a Service through its client, prints their ClusterIP and returns
// without stopping anything.
func runStarter(js string) error {
	var s starterSpec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		return err
	}
	cp, err := netns.Open(s.NS)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := kubecluster.Start(ctx, labOptions(s, cp))
	if err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lab"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	svc, err := c.Client.CoreV1().Services("lab").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "lab"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(starterResult{ClusterIP: svc.Spec.ClusterIP})
}

// TestDetachedInNamespace is the lab's use: a cluster started detached inside a
// namespace by a process that then exits; found again with Attach; reached from
// another namespace over a veth at https://172.26.236.176:6443, verified with the
// kubeconfig's CA; restarted; and stopped by StopDir, leaving no process.
func TestDetachedInNamespace(t *testing.T) {
	etcdBin, binDir := kubetest.Binaries(t, "kube-apiserver", "kube-controller-manager")
	cp := netnstest.New(t, "kcp")
	node := netnstest.New(t, "knode")
	veth(t, cp, node, apiAddr+"/24", nodeAddr+"/24")
	dir := t.TempDir()
	t.Cleanup(func() { // before the namespaces and dir go (cleanups run last first)
		if err := kubecluster.StopDir(dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if t.Failed() {
			t.Logf("logs:\n%s", kubecluster.Logs(dir, 30))
		}
	})
	spec := starterSpec{Dir: dir, BinDir: binDir, EtcdBin: etcdBin, NS: cp.Name()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// 1. Another process starts the cluster and exits.
	res := runStarterProcess(t, ctx, spec)

	// 2. Attach finds it and reads back what the starter created.
	c, err := kubecluster.Attach(ctx, kubecluster.Options{Dir: dir, Dial: netns.Dialer(cp)})
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != "https://127.0.0.1:6443" || c.ServerURL != serverURL {
		t.Errorf("attached URL %s, ServerURL %s", c.URL, c.ServerURL)
	}
	svc, err := c.Client.CoreV1().Services("lab").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != res.ClusterIP {
		t.Fatalf("lab/web after Attach: %v (clusterIP %v, starter saw %s)", err, svc.Spec.ClusterIP, res.ClusterIP)
	}
	if _, err := kubecluster.Start(ctx, labOptions(spec, cp)); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("Start on a running dir: err = %v", err)
	}
	// The lease reconciler publishes the advertise address for default/kubernetes.
	if err := kubetest.Wait(30*time.Second, func() (bool, string) {
		sl, err := c.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(sl.Endpoints, func(ep discoveryv1.Endpoint) bool { return slices.Contains(ep.Addresses, apiAddr) }), fmt.Sprint(sl.Endpoints)
	}); err != nil {
		t.Errorf("default/kubernetes endpoint %s: %v", apiAddr, err)
	}

	// 3. A client in the node's namespace uses the kubeconfig as is.
	fromNode := nodeClient(t, c.Kubeconfig, node, nil)
	if got, err := fromNode.CoreV1().Services("lab").Get(ctx, "web", metav1.GetOptions{}); err != nil || got.UID != svc.UID {
		t.Fatalf("lab/web from the node's namespace over %s: %v", serverURL, err)
	}
	// ... and verification is on: another CA is refused.
	otherCA, _, err := certutil.GenerateSelfSignedCertKey(apiAddr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = nodeClient(t, c.Kubeconfig, node, otherCA).CoreV1().Services("lab").Get(ctx, "web", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("with another CA: err = %v, want a certificate error", err)
	}

	// 4. Attached with the lab's Command and Detach, a cluster restarts its
	// apiserver (detached, in cp, same port).
	c, err = kubecluster.Attach(ctx, labOptions(spec, cp))
	if err != nil {
		t.Fatal(err)
	}
	before := readPids(t, dir)
	if err := c.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fromNode.CoreV1().Services("lab").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("lab/web after the restart: %v", err)
	}
	after := readPids(t, dir)
	if len(after) != 3 || after["kube-apiserver"] == before["kube-apiserver"] || after["etcd"] != before["etcd"] {
		t.Errorf("pids before the restart %v, after %v", before, after)
	}

	// 5. StopDir stops everything, and again is a no-op.
	if err := kubecluster.StopDir(dir); err != nil {
		t.Fatal(err)
	}
	if left := processesUnder(t, dir); len(left) > 0 {
		t.Errorf("still running after StopDir: %v", left)
	}
	if err := kubecluster.StopDir(dir); err != nil {
		t.Errorf("second StopDir: %v", err)
	}
	if _, err := kubecluster.Attach(ctx, kubecluster.Options{Dir: dir, Dial: netns.Dialer(cp)}); err == nil {
		t.Error("Attach after StopDir succeeded")
	}
}

// A component that fails gives a StartError with its log, and Start leaves
// nothing running (here in the caller's namespace, on loopback, free ports).
func TestStartFailureCleansUp(t *testing.T) {
	etcdBin, binDir := kubetest.Binaries(t, "kube-apiserver")
	dir := t.TempDir()
	t.Cleanup(func() { _ = kubecluster.StopDir(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := kubecluster.Start(ctx, kubecluster.Options{
		Dir: dir, BinDir: binDir, EtcdBin: etcdBin,
		APIServerFlags: []string{"--no-such-flag"},
		ReadyTimeout:   30 * time.Second,
	})
	var se *kubecluster.StartError
	if !errors.As(err, &se) || se.Component != "kube-apiserver" || !strings.Contains(se.Log, "no-such-flag") {
		t.Fatalf("err = %v, want a StartError of kube-apiserver with its log", err)
	}
	if left := processesUnder(t, dir); len(left) > 0 {
		t.Errorf("still running after a failed Start: %v", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "pids")); !os.IsNotExist(err) {
		t.Errorf("pids file after a failed Start: %v", err)
	}
}

// runStarterProcess runs the test binary as a starter (see TestMain) and waits
// for it to exit.
func runStarterProcess(t *testing.T, ctx context.Context, spec starterSpec) starterResult {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), starterEnv+"="+string(js))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("starter: %v\n%s", err, stderr.String())
	}
	var res starterResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.ClusterIP == "" {
		t.Fatalf("starter printed %q: %v", stdout.String(), err)
	}
	return res
}

// veth joins a and b with a veth pair, eth0 on both sides, holding addrA and addrB.
func veth(t *testing.T, a, b *netns.NS, addrA, addrB string) {
	t.Helper()
	err := a.Do(func() error {
		l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(b.Fd())}
		if err := netlink.LinkAdd(l); err != nil {
			return fmt.Errorf("add veth: %w", err)
		}
		return addrUp(addrA)
	})
	if err == nil {
		err = b.Do(func() error { return addrUp(addrB) })
	}
	if err != nil {
		t.Fatal(err)
	}
}

func addrUp(cidr string) error {
	l, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, a); err != nil {
		return fmt.Errorf("address %s: %w", cidr, err)
	}
	return netlink.LinkSetUp(l)
}

// nodeClient is a client from the kubeconfig that dials from inside ns, with its
// CA replaced by ca when given.
func nodeClient(t *testing.T, kubeconfig string, ns *netns.NS, ca []byte) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != serverURL || len(cfg.CAData) == 0 || cfg.Insecure {
		t.Fatalf("kubeconfig: host %s, CA %d bytes, insecure %v", cfg.Host, len(cfg.CAData), cfg.Insecure)
	}
	if ca != nil {
		cfg.CAData = ca
	}
	cfg.Dial = netns.Dialer(ns)
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfigOrDie(cfg)
}

// readPids reads dir/pids as name -> pid.
func readPids(t *testing.T, dir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var name string
		var pid int
		var start uint64
		if _, err := fmt.Sscan(line, &name, &pid, &start); err != nil {
			t.Fatalf("pids line %q: %v", line, err)
		}
		m[name] = pid
	}
	return m
}

// processesUnder returns the pids of live (non-zombie) processes whose command
// line names a path under dir.
func processesUnder(t *testing.T, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir+"/")) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

package syncbench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/bench/benchenv"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/netns"
)

// Environment of TestBenchSync.
const (
	// EnvSizes is a comma-separated list of Service counts (default 1000,10000,30000).
	EnvSizes = "SVCNET_BENCH_SIZES"
	// EnvChanges is the number of single-Service changes per run (default 50).
	EnvChanges = "SVCNET_BENCH_CHANGES"
	// EnvTools is a comma-separated list of svcnet, kube-proxy, svcnet-b
	// (see ToolSvcnetB), svcnet-iptables, kube-proxy-iptables, svcnet-ebpf,
	// svcnet-file and svcnet-file-warm (see SvcnetFile), run in that order,
	// repeats allowed (default svcnet,kube-proxy; "none" measures the
	// population alone). The iptables pair is left out of the default: at
	// 30k Services kube-proxy's iptables mode alone would take most of the
	// default budget (see the package doc).
	EnvTools = "SVCNET_BENCH_TOOLS"
	// EnvBudget bounds the whole benchmark (default 35m; go test's -timeout must
	// be larger).
	EnvBudget = "SVCNET_BENCH_BUDGET"
	// EnvOut, when set, is a file the final report is also written to.
	EnvOut = "SVCNET_BENCH_OUT"
	// EnvLogDir, when set, keeps the proxies' logs and kubeconfigs there
	// (default: the test's temporary directory, removed at the end).
	EnvLogDir = "SVCNET_BENCH_LOGDIR"
)

const (
	benchNamespace = "bench"
	// populateWorkers is the concurrency of Service/EndpointSlice creation.
	populateWorkers = 32
	// changeBudget bounds one run's change loop.
	changeBudget = 9 * time.Minute
)

// TestBenchSync is the rule-programming benchmark: svcnet proxy against
// kube-proxy, nftables mode and iptables mode, see the package doc. It skips unless
// SVCNET_BENCH is set.
func TestBenchSync(t *testing.T) {
	benchenv.RootGate(t, "bench-sync")
	start := time.Now()
	sizes := benchenv.Sizes(t, EnvSizes, "1000,10000,30000")
	changes := benchenv.Int(t, EnvChanges, 50, 0)
	budget := benchenv.Duration(t, EnvBudget, 35*time.Minute)
	deadline := start.Add(budget)
	var tools []Tool
	for _, name := range envList(EnvTools, ToolSvcnet+","+ToolKubeProxy) {
		switch name {
		case "none": // population only
		case ToolSvcnet:
			tools = append(tools, Svcnet(benchenv.SvcnetBinary(t)))
		case ToolSvcnetB:
			bin := os.Getenv(EnvSvcnetB)
			if bin == "" {
				t.Fatalf("%s lists %s: set %s to its binary", EnvTools, ToolSvcnetB, EnvSvcnetB)
			}
			tools = append(tools, SvcnetB(bin))
		case ToolKubeProxy:
			tools = append(tools, KubeProxy(k8sBinary(t, "kube-proxy")))
		case ToolSvcnetIPTables:
			tools = append(tools, SvcnetIPTables(benchenv.SvcnetBinary(t)))
		case ToolKubeProxyIPTables:
			tools = append(tools, KubeProxyIPTables(k8sBinary(t, "kube-proxy")))
		case ToolSvcnetEBPF:
			tools = append(tools, SvcnetEBPF(benchenv.SvcnetBinary(t)))
		case ToolSvcnetFile:
			tools = append(tools, SvcnetFile(benchenv.SvcnetBinary(t)))
		case ToolSvcnetFileWarm:
			tools = append(tools, SvcnetFileWarm(benchenv.SvcnetBinary(t)))
		default:
			t.Fatalf("%s: unknown tool %q", EnvTools, name)
		}
	}
	removeStaleNamespaces(t)

	env := kubetest.Start(t, kubetest.Options{})
	kubetest.CreateNode(t, env.Client, kubetest.Node{
		Name: nodeName, InternalIPs: []string{"172.26.236.177"}, PodCIDRs: []string{"192.168.1.0/24"}, Ready: true,
	})
	kubetest.CreateNamespace(t, env.Client, benchNamespace)
	client := fastClient(t, env.Config)
	u, err := url.Parse(env.URL)
	if err != nil {
		t.Fatalf("apiserver URL %q: %v", env.URL, err)
	}
	logf := func(format string, args ...any) {
		t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	dir := os.Getenv(EnvLogDir)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("%s: %v", EnvLogDir, err)
	}
	b := &Bench{
		Client: client, Namespace: benchNamespace, APIServer: u.Host,
		CAData: env.Config.TLSClientConfig.CAData, Token: env.Token,
		Dir: dir, Changes: changes, ChangeBudget: changeBudget,
		// Leave a minute for the last run's teardown and the report.
		Deadline: deadline.Add(-time.Minute),
		Logf:     logf,
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	logf("sizes %v, %d changes per run, tools %d, budget %v; logs in %s", sizes, changes, len(tools), budget, b.Dir)
	var results []Result
	var population []string
	have := 0
	for _, n := range sizes {
		if ctx.Err() != nil {
			t.Errorf("benchmark budget %v spent before N=%d", budget, n)
			break
		}
		line, err := populate(ctx, client, have, n, logf)
		if err != nil {
			t.Errorf("populate to %d Services: %v", n, err)
			break
		}
		population = append(population, line)
		have = n
		for _, tool := range tools {
			logf("%s N=%d: start", tool.Name, n)
			r := b.Run(ctx, tool, n)
			results = append(results, r)
			if r.Err != "" {
				t.Errorf("%s N=%d: %s", tool.Name, n, r.Err)
			}
			if r.Timeouts > 0 {
				t.Errorf("%s N=%d: %d changes never reached the kernel within %v", tool.Name, n, r.Timeouts, changeTimeout)
			}
			logf("%s N=%d: done: full %s, p50 %s, p99 %s over %d changes, RSS %s after sync, %s after changes, peak %s",
				tool.Name, n, FmtDur(r.Full), FmtDur(r.P50()), FmtDur(r.P99()), len(r.Changes), FmtMiB(r.RSS), FmtMiB(r.RSSEnd), FmtMiB(r.HWM))
		}
	}

	report := reportText(results, population, changes, time.Since(start))
	fmt.Print(report)
	if out := os.Getenv(EnvOut); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
	}
}

// reportText is the final report: definitions, the table, the targets.
func reportText(rs []Result, population []string, changes int, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== bench-sync: svcnet proxy vs kube-proxy (svcnet, kube-proxy: nftables; svcnet-iptables, kube-proxy-iptables: iptables-nft), %d CPUs, took %s\n",
		runtime.NumCPU(), took.Round(time.Second))
	b.WriteString("Services: selector-less ClusterIP, 1 TCP port, 1 EndpointSlice of 2 ready endpoints each.\n")
	for _, l := range population {
		b.WriteString("population: " + l + "\n")
	}
	b.WriteString(`full sync: elapsed= of the proxy's first full "SyncProxyRules complete" (v=2; kube-proxy: IPv4);
ready: process start to that log line. change: just before the Service Create call to the
netlink event of its frontend (the Service's EndpointSlice existed before): nftables tools,
the NEWSETELEM of its ClusterIP in map service-ips; iptables tools, the NEWRULE of its rule
in chain KUBE-SERVICES of table ip nat (destination its ClusterIP, a jump to its chain).
Serial, each one min-sync-period+200ms after the log line of the sync that wrote the
previous one; every tool at its defaults (--min-sync-period 1s, --sync-period 30s: svcnet
syncs every 30s on its own, kube-proxy's nftables mode hourly, its iptables mode every 30s).
p50/p99: nearest rank (p99 of 50 samples is the largest).
API create p50, create p99: the Create call alone (included in the change latency: the apiserver
allocates the ClusterIP before any watcher sees the Service; in kube-apiserver v1.36 each
allocation recounts every IPAddress object for its metrics, ipallocator.go createIPAddress:
Used() and Free(), an O(Services) step).
prog p50/p99: programming latency, the proxy's own part: from the arrival of the Service's
watch event at the bench (a watcher of the same apiserver, as the proxy is) to its frontend in
the kernel; below zero when the kernel had it first.
svcnet-file: svcnet proxy on a manifest (--state, as the lab publishes a cluster: every object a
JSON document on a line, the Services with the apiserver's ClusterIPs; no decode cache: a cold
start); its
change is the manifest replaced (temporary file, fsync, rename) with the created Service added,
its latency from the rename to the netlink event; "API create" is then the manifest's writing.
svcnet-file-warm: the same, started after svcnet get has read the manifest once (its decode
cache and allocations there, as an earlier agent leaves them).
RSS: VmRSS after the first full sync; RSS end: after the last change; peak: VmHWM at the end.
The RSS target holds for the larger of RSS and RSS end. ratios: kube-proxy / svcnet, each svcnet
tool against the kube-proxy mode of its layout (svcnet and svcnet-ebpf against kube-proxy,
svcnet-iptables against kube-proxy-iptables); ratio(RSS): RSS after the full sync.
`)
	fmt.Fprintf(&b, "changes wanted per run: %d\n\n", changes)
	b.WriteString(Summary(rs))
	if measured(rs, ToolSvcnet, ToolKubeProxy) || !measured(rs, ToolSvcnetIPTables, ToolKubeProxyIPTables) {
		b.WriteString("reference (docs/reference.md, upstream kube-proxy at 10k on this machine kind): 11.2s full, 3.3-3.8s per change, 326MB\n")
	}
	if measured(rs, ToolSvcnetIPTables, ToolKubeProxyIPTables) {
		b.WriteString("reference (docs/reference.md, upstream kube-proxy iptables mode at 10k): 40.4s full, 0.9-1.8s per later sync after one change\n")
	}
	return b.String()
}

// populate grows the benchmark namespace from have to n Services (each with
// its EndpointSlice) and returns a line saying how fast.
func populate(ctx context.Context, c kubernetes.Interface, have, n int, logf func(string, ...any)) (string, error) {
	if n <= have {
		return fmt.Sprintf("%d Services present", have), nil
	}
	t0 := time.Now()
	logf("populate: %d -> %d Services", have, n)
	var lat callStats
	err := ForEach(ctx, have, n, populateWorkers, 5000, func(done int) {
		sl, sv := lat.takeMeans()
		logf("populate: %d/%d created (%.0f pairs/s so far; mean call latency in this step: EndpointSlice %s, Service %s)",
			have+done, n, float64(done)/time.Since(t0).Seconds(), FmtDur(sl), FmtDur(sv))
	}, func(ctx context.Context, i int) error {
		sl, sv, err := CreatePair(ctx, c, benchNamespace, ServiceName(i), EndpointIPs(i))
		lat.add(sl, sv)
		return err
	})
	if err != nil {
		return "", err
	}
	d := time.Since(t0)
	line := fmt.Sprintf("%d -> %d Services (+%d Services and %d EndpointSlices) in %s: %.0f objects/s, %d workers",
		have, n, n-have, n-have, d.Round(100*time.Millisecond), float64(2*(n-have))/d.Seconds(), populateWorkers)
	logf("populate: %s", line)
	return line, nil
}

// callStats accumulates create latencies between progress lines.
type callStats struct {
	mu         sync.Mutex
	n          int
	slice, svc time.Duration
}

func (s *callStats) add(slice, svc time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.slice += slice
	s.svc += svc
}

// takeMeans returns the mean latencies since the last call and resets them.
func (s *callStats) takeMeans() (slice, svc time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return -1, -1
	}
	slice, svc = s.slice/time.Duration(s.n), s.svc/time.Duration(s.n)
	s.n, s.slice, s.svc = 0, 0, 0
	return slice, svc
}

// fastClient is a client without client-side throttling worth the name, for
// populating tens of thousands of objects.
func fastClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20000, 40000
	cfg.UserAgent = "svcnet-bench"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// k8sBinary returns the path of an upstream binary from SVCNET_K8S_BIN, or
// builds it with tools/k8s/build.sh (cached).
func k8sBinary(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv(kubetest.EnvK8sBin)
	if dir == "" {
		out, err := exec.Command("../../tools/k8s/build.sh", name).Output()
		if err != nil {
			t.Fatalf("tools/k8s/build.sh %s: %v", name, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// removeStaleNamespaces deletes namespaces of earlier benchmark processes that
// are gone (a run killed by go test's timeout cannot clean up itself).
func removeStaleNamespaces(t *testing.T) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(netns.RunDir, "sn-bench-*"))
	for _, path := range names {
		name := filepath.Base(path)
		pid, err := strconv.Atoi(name[strings.LastIndex(name, "-")+1:])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue
		}
		if err := netns.DeleteNamed(name); err != nil {
			t.Logf("stale namespace %s: %v", name, err)
		}
	}
}

func envList(key, def string) []string {
	v := os.Getenv(key)
	if v == "" {
		v = def
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

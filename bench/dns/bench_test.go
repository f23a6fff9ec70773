package dnsbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/bench/benchenv"
	syncbench "github.com/svcnet/svcnet/bench/sync"
	"github.com/svcnet/svcnet/internal/dns/difftest"
	"github.com/svcnet/svcnet/internal/kubetest"
)

// Environment of TestBenchDNS.
const (
	// EnvServices is the number of Services (default 10000).
	EnvServices = "SVCNET_BENCH_SERVICES"
	// EnvRounds is the number of rounds per server (default 3); EnvRound the
	// measured length of each (default 10s).
	EnvRounds = "SVCNET_BENCH_ROUNDS"
	EnvRound  = "SVCNET_BENCH_ROUND"
	// EnvOut, when set, is a file the report is also written to.
	EnvOut = "SVCNET_BENCH_OUT"
)

const (
	namespace = "bench"
	zone      = "cluster.local"
	// budget bounds the whole benchmark (go test's -timeout must be larger).
	budget = 14 * time.Minute
	// serverCPU and loadCPU are the cores of the servers and the load.
	serverCPU, loadCPU = 1, 0
	missingNames       = 100
	// settle is the unmeasured load on each server before the rounds.
	settle = 3 * time.Second
)

// TestBenchDNS is the DNS benchmark (see the package doc). It skips unless
// SVCNET_BENCH is set.
func TestBenchDNS(t *testing.T) {
	benchenv.Gate(t, "bench-dns")
	start := time.Now()
	n := benchenv.Int(t, EnvServices, 10000, 1)
	rounds := benchenv.Int(t, EnvRounds, 3, 1)
	roundLen := benchenv.Duration(t, EnvRound, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	logf := func(format string, args ...any) {
		t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	env := kubetest.Start(t, kubetest.Options{})
	coreBin, err := difftest.CoreDNSBinary()
	if err != nil {
		t.Fatal(err)
	}
	svcnetBin := benchenv.SvcnetBinary(t)
	kubetest.CreateNamespace(t, env.Client, namespace)
	populated := populate(ctx, t, fastClient(t, env.Config), n, logf)

	pinned := runtime.NumCPU() >= 2
	cpus := ""
	if pinned {
		cpus = strconv.Itoa(serverCPU)
	} else {
		logf("only %d CPU: nothing pinned", runtime.NumCPU())
	}
	servers := map[string]*difftest.Server{
		ServerCoreDNS: startServer(t, difftest.StartCoreDNS, coreBin, env.Kubeconfig, cpus),
		ServerSvcnet:  startServer(t, difftest.StartSvcnet, svcnetBin, env.Kubeconfig, cpus),
	}
	last := difftest.Query{Name: syncbench.ServiceName(n-1) + "." + namespace + ".svc." + zone + ".", Type: dns.TypeA}
	for _, name := range []string{ServerCoreDNS, ServerSvcnet} {
		t0 := time.Now()
		s := servers[name]
		if err := difftest.WaitAnswer(ctx, s.Addr, last, 3*time.Minute, func(m *dns.Msg) bool {
			return m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0
		}); err != nil {
			t.Fatalf("%s not ready: %v\n%s", name, err, s.Tail(30))
		}
		logf("%s answers %s after %v", name, last, time.Since(t0).Round(time.Millisecond))
	}

	if pinned {
		restore, err := pinProcess(loadCPU)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := restore(); err != nil {
				t.Error(err)
			}
		}()
	}
	cfg := LoadConfig{Names: names(n), Missing: missing(), Duration: roundLen}.withDefaults()
	// One unmeasured pass per server first: the Go runtimes of both servers
	// (and of the generator) grow their heaps and threads, and the apiserver
	// settles after the population.
	for _, name := range []string{ServerCoreDNS, ServerSvcnet} {
		warm := cfg
		warm.Addr, warm.Warmup, warm.Duration = servers[name].Addr, time.Second, settle
		if _, err := Load(ctx, warm); err != nil {
			t.Fatalf("%s warm-up: %v", name, err)
		}
	}
	var results []Round
	for i := range rounds {
		for _, name := range []string{ServerCoreDNS, ServerSvcnet} {
			if ctx.Err() != nil {
				t.Fatalf("benchmark budget %v spent in round %d", budget, i+1)
			}
			r, err := measure(ctx, servers[name], name, cfg)
			if err != nil {
				t.Fatalf("%s round %d: %v\n%s", name, i+1, err, servers[name].Tail(20))
			}
			results = append(results, r)
			logf("%s round %d: %.0f queries/s, p50 %s, p99 %s, lost %d, wrong %d, CPU %.0f%%", name, i+1, r.Stats.QPS(),
				fmtDur(r.Stats.Percentile(50)), fmtDur(r.Stats.Percentile(99)), r.Stats.Lost, r.Stats.Wrong, 100*r.CPU)
			if r.Stats.Wrong > 0 {
				t.Errorf("%s round %d: %d wrong answers, first: %s", name, i+1, r.Stats.Wrong, r.Stats.FirstWrong)
			}
		}
	}

	pin := "not pinned"
	if pinned {
		pin = fmt.Sprintf("servers pinned to CPU %d, load generator to CPU %d", serverCPU, loadCPU)
	}
	header := fmt.Sprintf("\n=== bench-dns: svcnet dns vs CoreDNS %s (kubernetes plugin), %d CPUs, took %s\n"+
		"population: %s\n"+
		"%s; after %v of unmeasured load on each, %d rounds each, alternating coredns/svcnet, %v warm-up + %v measured per round\n"+
		"load: UDP on loopback, %d sockets x %d queries in flight, A for random existing Services, every %dth a missing name (NXDOMAIN)\n"+
		"queries/s: answers received in the measured seconds; p50/p99: send to receive, nearest rank over all rounds\n"+
		"CPU: server CPU time / measured time (1 core = 100%%)\n\n",
		coreVersion(coreBin), runtime.NumCPU(), time.Since(start).Round(time.Second), populated, pin, settle+time.Second, rounds,
		cfg.Warmup, cfg.Duration, cfg.Sockets, cfg.InFlight, cfg.MissingEvery)
	report := Report(results, header)
	fmt.Print(report)
	if out := os.Getenv(EnvOut); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
	}
}

// measure runs one round of load against s and its CPU use.
func measure(ctx context.Context, s *difftest.Server, name string, cfg LoadConfig) (Round, error) {
	cfg.Addr = s.Addr
	cfg = cfg.withDefaults()
	// The CPU time is sampled around the measured interval only.
	type sample struct {
		cpu time.Duration
		err error
	}
	before := make(chan sample, 1)
	go func() {
		select {
		case <-time.After(cfg.Warmup):
		case <-ctx.Done():
		}
		c, err := cpuTime(s.Pid())
		before <- sample{c, err}
	}()
	st, err := Load(ctx, cfg)
	after, aerr := cpuTime(s.Pid())
	b := <-before
	if err == nil {
		err = b.err
	}
	if err == nil {
		err = aerr
	}
	if err != nil {
		return Round{}, err
	}
	// The load ends exactly Warmup+Duration after it started; the later
	// sample includes at most the drain (the server is idle then).
	return Round{Server: name, Stats: st, CPU: (after - b.cpu).Seconds() / cfg.Duration.Seconds()}, nil
}

func startServer(t *testing.T, start func(difftest.ServerOptions) (*difftest.Server, error), bin, kubeconfig, cpus string) *difftest.Server {
	t.Helper()
	port, err := difftest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s, err := start(difftest.ServerOptions{Binary: bin, Kubeconfig: kubeconfig, Dir: t.TempDir(), Port: port, CPUs: cpus})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (last 20 lines):\n%s", s.Name, s.Tail(20))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

// names are the existing Services' names; missing names that don't exist.
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = syncbench.ServiceName(i) + "." + namespace + ".svc." + zone + "."
	}
	return out
}

func missing() []string {
	out := make([]string, missingNames)
	for i := range out {
		out[i] = fmt.Sprintf("missing-%03d.%s.svc.%s.", i, namespace, zone)
	}
	return out
}

// populate creates n Services, each with its EndpointSlice, as bench/sync does,
// and returns a line saying how fast.
func populate(ctx context.Context, t *testing.T, c kubernetes.Interface, n int, logf func(string, ...any)) string {
	t.Helper()
	t0 := time.Now()
	err := syncbench.ForEach(ctx, 0, n, 32, 2000, func(done int) {
		logf("populate: %d/%d (%.0f Services/s)", done, n, float64(done)/time.Since(t0).Seconds())
	}, func(ctx context.Context, i int) error {
		_, _, err := syncbench.CreatePair(ctx, c, namespace, syncbench.ServiceName(i), syncbench.EndpointIPs(i))
		return err
	})
	if err != nil {
		t.Fatalf("populate %d Services: %v", n, err)
	}
	d := time.Since(t0)
	return fmt.Sprintf("%d ClusterIP Services (1 TCP port, 1 EndpointSlice of 2 ready endpoints each) created in %s",
		n, d.Round(100*time.Millisecond))
}

// fastClient is a client without client-side throttling worth the name.
func fastClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20000, 40000
	cfg.UserAgent = "svcnet-bench-dns"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// coreVersion is the first line of `coredns -version`'s output.
func coreVersion(bin string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-version").Output()
	if err != nil {
		return "(version unknown)"
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}

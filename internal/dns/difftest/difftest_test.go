package difftest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/kubetest"
)

const (
	// EnvSeed overrides the seed of the queries' random case (default 1).
	EnvSeed = "SVCNET_DIFFTEST_SEED"
	// EnvOut, when set, names a file that gets every result: each difference
	// (known or not) in full, each equal answer on one line (for reviewing the
	// answers and writing differences.md).
	EnvOut = "SVCNET_DIFFTEST_OUT"
	// EnvSvcnet names a prebuilt svcnet binary (default: built from this tree).
	EnvSvcnet = "SVCNET_DIFFTEST_SVCNET"

	readyTimeout = 60 * time.Second
	// maxReported bounds the differences written into the failure message.
	maxReported = 60
)

// TestDifferential is the differential test (see the package doc). As a control,
// a second CoreDNS first answers every query: it must agree with the first one
// everywhere, so that every difference found afterwards is svcnet's.
func TestDifferential(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{ServiceClusterIPRange: ServiceCIDRs})
	known := readKnown(t)
	coreBin, err := CoreDNSBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	svcnetBin, err := SvcnetBinary(EnvSvcnet, dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	f := NewFixture("cluster.local")
	if err := f.Create(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	core := startServer(t, StartCoreDNS, "coredns", coreBin, env.Kubeconfig)
	control := startServer(t, StartCoreDNS, "coredns-control", coreBin, env.Kubeconfig)
	svcnet := startServer(t, StartSvcnet, "svcnet", svcnetBin, env.Kubeconfig)
	for _, s := range []*Server{core, control, svcnet} {
		err := WaitAnswer(ctx, s.Addr, f.Sentinel, readyTimeout, func(m *dns.Msg) bool {
			return m.Rcode == dns.RcodeSuccess && len(m.Answer) == 1 && strings.HasSuffix(m.Answer[0].String(), "\t"+f.SentinelIP)
		})
		if err != nil {
			t.Fatalf("%s not ready: %v\n%s", s.Name, err, s.Tail(30))
		}
	}

	queries := Generate(f, seed(t))
	if len(queries) < 500 {
		t.Fatalf("only %d queries generated, want at least 500", len(queries))
	}

	// The control: CoreDNS against CoreDNS.
	results, err := Compare(ctx, queries, core.Addr, control.Addr)
	if err != nil {
		t.Fatal(err)
	}
	var noise []string
	for _, r := range results {
		if len(r.Fields) > 0 && len(noise) < maxReported {
			noise = append(noise, r.Describe())
		}
	}
	if len(noise) > 0 {
		t.Fatalf("control: two CoreDNS disagree (the comparison is not deterministic):\n%s", strings.Join(noise, "\n"))
	}

	results, err = Compare(ctx, queries, core.Addr, svcnet.Addr)
	if err != nil {
		t.Fatalf("%v\nsvcnet log:\n%s", err, svcnet.Tail(30))
	}
	writeOut(t, results)
	v := Classify(results, known)
	t.Logf("differential test against CoreDNS (%s): %s", coreBin, v.Summary())
	for i, r := range v.Unlisted {
		if i == maxReported {
			t.Errorf("... and %d more unlisted differences", len(v.Unlisted)-maxReported)
			break
		}
		t.Errorf("difference not listed in differences.md: %s", r.Describe())
	}
	for _, k := range v.Stale {
		t.Errorf("differences.md:%d %q: no query differs this way any more: remove the entry", k.Line, k.Title)
	}
}

// startServer starts one server on a free port, stopped at the end of the test
// (its log tail is logged when the test failed).
func startServer(t *testing.T, start func(ServerOptions) (*Server, error), name, bin, kubeconfig string) *Server {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := start(ServerOptions{Binary: bin, Kubeconfig: kubeconfig, Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	s.Name = name
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (last 20 lines):\n%s", name, s.Tail(20))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

func readKnown(t *testing.T) []Known {
	t.Helper()
	b, err := os.ReadFile("differences.md")
	if err != nil {
		t.Fatal(err)
	}
	known, err := ParseKnown(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return known
}

func seed(t *testing.T) uint64 {
	t.Helper()
	v := os.Getenv(EnvSeed)
	if v == "" {
		return 1
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", EnvSeed, v, err)
	}
	return n
}

// writeOut writes every result to $SVCNET_DIFFTEST_OUT, if set.
func writeOut(t *testing.T, results []Result) {
	t.Helper()
	path := os.Getenv(EnvOut)
	if path == "" {
		return
	}
	var b strings.Builder
	for _, r := range results {
		if len(r.Fields) > 0 {
			fmt.Fprintln(&b, "DIFF "+r.Describe())
			continue
		}
		c := r.CoreDNS
		fmt.Fprintf(&b, "SAME %s  %s [%s] answer %q authority %q additional %q\n", r.Query, c.Rcode, c.Flags, c.Answer, c.Authority, c.Additional)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("write %s: %v", path, err)
	}
}

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/conformance"
	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
	"github.com/svcnet/svcnet/internal/process"
)

// Environment of the side-by-side run (`make conformance`).
const (
	// envProcs is ginkgo's --procs for the parallel pass; default 4.
	envProcs = "SVCNET_CONFORMANCE_PROCS"
	// envOut, when set, is a directory that keeps each pass's ginkgo output,
	// JSON report and JUnit files (SIDE-PASS.*) after the run; default: the
	// test's temporary directory, removed with it.
	envOut = "SVCNET_CONFORMANCE_OUT"
)

// suiteTimeout bounds one ginkgo pass.
const suiteTimeout = 3 * time.Hour

// runSuite runs the specs sel selects with ginkgo and e2e.test (both from
// tools/k8s) from the control plane's namespace, which reaches the API
// server, the nodes and the Pods: a parallel pass of the non-[Serial] specs
// (ginkgo --procs), then a serial pass of the [Serial] ones. It returns the
// merged results; each pass's ginkgo output and JSON report are kept under
// the test's temporary directory, and logged on failure. side names the run
// in logs.
func runSuite(t *testing.T, ctx context.Context, c *nodecluster.Cluster, side string, sel conformance.Selection) []conformance.Result {
	t.Helper()
	_, k8sBin, _ := nodetest.Binaries(t)
	ginkgo, e2e := filepath.Join(k8sBin, "ginkgo"), filepath.Join(k8sBin, "e2e.test")
	procs := 4
	if v := os.Getenv(envProcs); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", envProcs, v)
		}
		procs = n
	}
	dir := os.Getenv(envOut)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var reports [][]conformance.Result
	for _, pass := range []struct {
		name  string
		procs int
		sel   conformance.Selection
	}{
		{"parallel", procs, conformance.Selection{Focus: sel.Focus, Skip: orExpr(sel.Skip, `\[Serial\]`)}},
		{"serial", 1, conformance.Selection{Focus: andSerial(sel.Focus), Skip: sel.Skip}},
	} {
		report := filepath.Join(dir, side+"-"+pass.name+".json")
		logPath := filepath.Join(dir, side+"-"+pass.name+".log")
		// An earlier run's report must not stand in for this one's.
		if err := os.Remove(report); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		argv := []string{ginkgo, "--procs=" + strconv.Itoa(pass.procs), "--no-color", "--timeout=" + suiteTimeout.String(),
			"--focus=" + pass.sel.Focus, "--json-report=" + report}
		if pass.procs > 1 {
			argv = append(argv, "-p")
		}
		if pass.sel.Skip != "" {
			argv = append(argv, "--skip="+pass.sel.Skip)
		}
		argv = append(argv, e2e, "--",
			"--provider=local", "--kubeconfig="+c.Kubeconfig, fmt.Sprintf("--num-nodes=%d", len(c.Nodes)),
			"--disable-log-dump", "--report-dir="+filepath.Join(dir, side+"-"+pass.name))
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, suiteTimeout+5*time.Minute)
		cmd := c.Command(cctx, argv...)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = logf, logf
		runErr := cmd.Run() // non-zero when a spec failed: the report says which
		cancel()
		logf.Close()
		f, err := os.Open(report)
		if err != nil {
			t.Fatalf("%s %s pass: no report (%v; ginkgo: %v); its output:\n%s", side, pass.name, err, runErr, process.LogTail(logPath, 60))
		}
		rs, err := conformance.ParseReport(f, report)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		selected := conformance.Merge(pass.sel, rs)
		t.Logf("%s %s pass: %d specs in %v (ginkgo: %v)", side, pass.name, len(selected), time.Since(start).Round(time.Second), runErr)
		if t.Failed() || runErr != nil {
			t.Logf("%s %s pass, the end of ginkgo's output:\n%s", side, pass.name, process.LogTail(logPath, 80))
		}
		reports = append(reports, selected)
	}
	return conformance.Merge(sel, reports...)
}

// orExpr is a|b, or b when a is empty.
func orExpr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "|" + b
}

// andSerial narrows focus to the [Serial] specs it selects.
func andSerial(focus string) string {
	if focus == "" {
		return `\[Serial\]`
	}
	return `(` + focus + `).*\[Serial\]|\[Serial\].*(` + focus + `)`
}

// deployUpstream deploys the side svcnet is judged against: svcnet's CNI
// plugin (deploy/cni: both sides network Pods alike), upstream kube-proxy in
// nftables mode and CoreDNS as kube-dns (testdata/upstream, as kubeadm
// deploys them), with kube-proxy given the API server's address as
// kubeadm's kubeconfig gives it.
func deployUpstream(t *testing.T, ctx context.Context, c *nodecluster.Cluster) {
	t.Helper()
	overlay{
		resources: []string{"deploy/cni", "test/node/testdata/upstream"},
		patches:   []string{kubeProxyAPIServerPatch(t, c)},
	}.apply(t, ctx, c)
	rollout(t, ctx, c, "daemonset/kube-proxy", "daemonset/svcnet-cni", "deployment/coredns")
}

// kubeProxyAPIServerPatch sets KUBERNETES_SERVICE_HOST/PORT on kube-proxy's
// container to the API server's real address: its in-cluster configuration
// then reaches the API server before the kubernetes Service is programmed.
func kubeProxyAPIServerPatch(t *testing.T, c *nodecluster.Cluster) string {
	t.Helper()
	cm := apiserverPatch(t, c, "x")
	host := between(cm, `apiserver-host: "`, `"`)
	port := between(cm, `apiserver-port: "`, `"`)
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-proxy
  namespace: kube-system
spec:
  template:
    spec:
      containers:
        - name: kube-proxy
          env:
            - name: KUBERNETES_SERVICE_HOST
              value: "%s"
            - name: KUBERNETES_SERVICE_PORT
              value: "%s"
`, host, port)
}

func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return v
}

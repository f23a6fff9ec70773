package node

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/image"
	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
	"github.com/svcnet/svcnet/internal/process"
	"github.com/svcnet/svcnet/internal/testbin"
)

// rolloutTimeout bounds the wait for one workload of deploy/ to be rolled out.
const rolloutTimeout = 5 * time.Minute

var svcnetImg struct {
	once sync.Once
	path string
	err  error
}

// svcnetImage builds svcnet's image as `make image` does (a static binary,
// image.Svcnet, tagged image.SvcnetRepository:latest, the reference deploy/
// names) once per test binary and returns its archive.
func svcnetImage(t *testing.T) string {
	t.Helper()
	svcnetImg.once.Do(func() {
		bin := filepath.Join(binDir, "svcnet-static")
		if svcnetImg.err = testbin.BuildStatic(bin); svcnetImg.err != nil {
			return
		}
		img, err := image.Svcnet(bin, image.SvcnetRepository+":latest")
		if err != nil {
			svcnetImg.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		tb, err := (&image.Builder{}).Build(ctx, img)
		svcnetImg.path, svcnetImg.err = tb.Path, err
	})
	if svcnetImg.err != nil {
		t.Fatalf("svcnet image: %v", svcnetImg.err)
	}
	return svcnetImg.path
}

// allImages returns the archives of every test image and of svcnet's, sorted.
func allImages(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, p := range nodetest.Images(t) {
		paths = append(paths, p)
	}
	paths = append(paths, svcnetImage(t))
	slices.Sort(paths)
	return slices.Compact(paths)
}

// overlay is a user's kustomization over directories of this repository:
// what a user writes to set what deploy/ leaves to them (the API server's
// address). Resources are paths relative to the repository root.
type overlay struct {
	resources []string
	// patches are strategic merge patches (YAML documents).
	patches []string
}

// apply writes o into a fresh directory and runs `kubectl apply -k` on it in
// the cluster; kustomize takes only relative paths to other directories.
func (o overlay) apply(t *testing.T, ctx context.Context, c *nodecluster.Cluster) {
	t.Helper()
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range o.resources {
		rel, err := filepath.Rel(dir, filepath.Join(root, r))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  - %s\n", rel)
	}
	if len(o.patches) > 0 {
		b.WriteString("patches:\n")
		for _, p := range o.patches {
			b.WriteString("  - patch: |\n")
			for _, l := range strings.Split(strings.TrimRight(p, "\n"), "\n") {
				fmt.Fprintf(&b, "      %s\n", l)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, ctx, c, "apply", "-k", dir)
}

// apiserverPatch gives deploy/proxy's ConfigMap the API server's real address
// (its optional apiserver-host and apiserver-port keys), as deploy/proxy's
// README asks: the proxy must reach the API server before it has programmed
// the kubernetes Service.
func apiserverPatch(t *testing.T, c *nodecluster.Cluster, configMap string) string {
	t.Helper()
	u, err := url.Parse(c.APIServer)
	if err != nil {
		t.Fatalf("API server address %q: %v", c.APIServer, err)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  namespace: kube-system
data:
  apiserver-host: "%s"
  apiserver-port: "%s"
`, configMap, u.Hostname(), u.Port())
}

// memberlistSecret creates the speakers' heartbeat key, as deploy/proxy's
// README tells users to.
func memberlistSecret(t *testing.T, ctx context.Context, c *nodecluster.Cluster) {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	kubectl(t, ctx, c, "-n", "kube-system", "create", "secret", "generic", "svcnet-memberlist",
		"--from-literal=secretkey="+base64.StdEncoding.EncodeToString(key))
}

// rollout waits for each workload ("daemonset/NAME", "deployment/NAME" in
// kube-system) to be rolled out, as `kubectl rollout status` reports it.
func rollout(t *testing.T, ctx context.Context, c *nodecluster.Cluster, workloads ...string) {
	t.Helper()
	for _, w := range workloads {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, rolloutTimeout+30*time.Second)
		out, err := c.Kubectl(cctx, "-n", "kube-system", "rollout", "status", w, "--timeout="+rolloutTimeout.String()).CombinedOutput()
		cancel()
		if err != nil {
			pods, _ := c.Kubectl(ctx, "-n", "kube-system", "get", "pods", "-o", "wide").CombinedOutput()
			events, _ := c.Kubectl(ctx, "-n", "kube-system", "get", "events", "--sort-by=.lastTimestamp").CombinedOutput()
			t.Fatalf("rollout status %s: %v\n%s\npods:\n%s\nevents:\n%s\nlogs:\n%s", w, err, out, pods, process.LastLines(string(events), 40), workloadLogs(ctx, c, w))
		}
		t.Logf("%s rolled out in %v", w, time.Since(start).Round(100*time.Millisecond))
	}
}

// kubectl runs kubectl in the cluster and fails t on error; it returns the
// output.
func kubectl(t *testing.T, ctx context.Context, c *nodecluster.Cluster, args ...string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := c.Kubectl(cctx, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// repoPath is a path of this repository, from its root.
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

// workloadLogs returns the last log lines of every container of workload's
// Pods (and of each one's previous run, when it restarted).
func workloadLogs(ctx context.Context, c *nodecluster.Cluster, workload string) string {
	var b strings.Builder
	for _, previous := range []bool{false, true} {
		args := []string{"-n", "kube-system", "logs", workload, "--all-containers", "--all-pods", "--prefix", "--tail=20"}
		if previous {
			args = append(args, "--previous")
		}
		out, _ := c.Kubectl(ctx, args...).CombinedOutput()
		fmt.Fprintf(&b, "--- kubectl %s\n%s\n", strings.Join(args, " "), out)
	}
	return b.String()
}

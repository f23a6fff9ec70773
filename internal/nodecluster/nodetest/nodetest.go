// Package nodetest brings up a node cluster (internal/nodecluster) for one
// test: the node tier's skip rules, the binaries it runs (tools/k8s,
// tools/containerd), the cluster's removal when the test ends, pass or fail,
// with a check that nothing of it is left, and its logs in the test log when
// the test failed, and the test images. It is a normal package meant for
// _test.go files (like internal/kubetest and internal/lab/labtest).
package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/image"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/testbin"
)

const (
	// EnvRequireRoot, when set, turns every skip for a missing prerequisite
	// into a failure (CI sets it).
	EnvRequireRoot = kubetest.EnvRequireRoot
	// EnvContainerdBin names a directory holding containerd, ctr and
	// containerd-shim-runc-v2; when unset, tools/containerd/build.sh builds
	// them (cached).
	EnvContainerdBin = "SVCNET_CONTAINERD_BIN"
	// buildTimeout bounds tools/containerd/build.sh: a first build takes
	// minutes on 2 cores.
	buildTimeout = 30 * time.Minute
	// logLines is how many lines of each log a failed test shows.
	logLines = 40
)

// K8sCommands are the Kubernetes commands a node cluster runs, and kubectl.
var K8sCommands = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"}

// RequireTier applies the house rule for the node tier: skip only when
// SVCNET_REQUIRE_ROOT is unset and the test runs with -short or not as root;
// otherwise fail if not root.
func RequireTier(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvRequireRoot) == "" {
		if testing.Short() {
			t.Skip("node tier: skipped with -short")
		}
		if os.Geteuid() != 0 {
			t.Skipf("node tier: not root and %s unset", EnvRequireRoot)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatalf("node tier: needs root (%s is set)", EnvRequireRoot)
	}
}

// Binaries applies RequireTier, then returns etcd, the directory of
// K8sCommands (SVCNET_K8S_BIN, else tools/k8s/build.sh) and the directory of
// containerd's binaries (SVCNET_CONTAINERD_BIN, else
// tools/containerd/build.sh). A missing one fails t.
func Binaries(t testing.TB) (etcd, k8sBin, containerdBin string) {
	t.Helper()
	RequireTier(t)
	etcd, k8sBin = kubetest.Binaries(t, K8sCommands...)
	dir, err := containerdDir()
	if err != nil {
		t.Fatalf("node tier: %v", err)
	}
	return etcd, k8sBin, dir
}

var containerd struct {
	once sync.Once
	dir  string
	err  error
}

func containerdDir() (string, error) {
	if dir := os.Getenv(EnvContainerdBin); dir != "" {
		return dir, nil
	}
	containerd.once.Do(func() {
		root, err := testbin.ModuleRoot()
		if err != nil {
			containerd.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(root, "tools/containerd/build.sh"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			containerd.err = fmt.Errorf("tools/containerd/build.sh: %w\n%s", err, stderr.String())
			return
		}
		containerd.dir = strings.TrimSpace(stdout.String())
	})
	return containerd.dir, containerd.err
}

var seq atomic.Int64

// Name returns a cluster name unique to this process and call.
func Name() string { return fmt.Sprintf("nc%d-%d", os.Getpid()%100000, seq.Add(1)) }

// Up brings up the cluster o describes for t (nodecluster.Up). What o leaves
// empty is filled in: Name (Name), Dir (under t.TempDir), EtcdBin, K8sBin and
// ContainerdBin (Binaries). When the test ends, the cluster's logs go to the
// test log if it failed, and it is removed (Down); whatever is left of it
// then fails the test. A failed Up fails t with its error and logs.
func Up(t *testing.T, ctx context.Context, o nodecluster.Options) *nodecluster.Cluster {
	t.Helper()
	etcd, k8sBin, containerdBin := Binaries(t)
	if o.Name == "" {
		o.Name = Name()
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(t.TempDir(), "cluster")
	}
	if o.EtcdBin == "" {
		o.EtcdBin = etcd
	}
	if o.K8sBin == "" {
		o.K8sBin = k8sBin
	}
	if o.ContainerdBin == "" {
		o.ContainerdBin = containerdBin
	}
	var c *nodecluster.Cluster
	t.Cleanup(func() {
		if c != nil && t.Failed() {
			t.Logf("node cluster %s logs:\n%s", o.Name, c.Logs(logLines))
		}
		down := func() error { return nodecluster.Down(o.Name, o.Dir) }
		if c != nil {
			down = c.Down // also closes its namespaces' descriptors
		}
		if err := down(); err != nil {
			t.Errorf("node cluster down: %v", err)
		}
		CheckGone(t, o.Name, o.Dir, "node cluster down")
	})
	start := time.Now()
	var err error
	if c, err = nodecluster.Up(ctx, o); err != nil {
		t.Fatalf("node cluster up: %v", err)
	}
	t.Logf("node cluster %s: %d nodes Ready in %v", o.Name, len(c.Nodes), time.Since(start).Round(100*time.Millisecond))
	return c
}

// CheckGone fails t for each thing of cluster name (state directory dir)
// that is left after what (e.g. "down"): nodecluster.Leftovers' namespaces,
// cgroups, processes, mounts and files.
func CheckGone(t testing.TB, name, dir, after string) {
	t.Helper()
	left, err := nodecluster.Leftovers(name, dir)
	if err != nil {
		t.Errorf("node cluster %s: leftovers: %v", name, err)
		return
	}
	for _, l := range left {
		t.Errorf("left after %s: %s", after, l)
	}
}

var testImages struct {
	once sync.Once
	refs map[string]string
	err  error
}

// Images returns, by reference, the image archives of the node tier's test
// images (image.BuildTestImages: pause, agnhost and the other images the e2e
// framework's sig-network specs run, kube-proxy and CoreDNS, built once and
// cached), building them once per test binary. It applies RequireTier first:
// building needs root.
func Images(t testing.TB) map[string]string {
	t.Helper()
	RequireTier(t)
	testImages.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		tbs, err := image.BuildTestImages(ctx, image.TestImageOptions{})
		if err != nil {
			testImages.err = err
			return
		}
		testImages.refs = map[string]string{}
		for _, tb := range tbs {
			for _, r := range tb.Refs {
				testImages.refs[r] = tb.Path
			}
		}
	})
	if testImages.err != nil {
		t.Fatalf("node tier: test images: %v", testImages.err)
	}
	return testImages.refs
}

// Image returns the archive of the test image ref (Images).
func Image(t testing.TB, ref string) string {
	t.Helper()
	p, ok := Images(t)[ref]
	if !ok {
		t.Fatalf("node tier: no test image %s", ref)
	}
	return p
}

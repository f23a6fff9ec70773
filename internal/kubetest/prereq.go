package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/process"
)

const (
	// modulePath identifies the repository's go.mod when looking for the repo root.
	modulePath = "github.com/svcnet/svcnet"
	// EnvRequireRoot, when set, turns every skip for a missing prerequisite into a
	// failure (CI sets it).
	EnvRequireRoot = "SVCNET_REQUIRE_ROOT"
	// EnvK8sBin names a directory holding kube-apiserver and kube-controller-manager;
	// when set, tools/k8s/build.sh is not run.
	EnvK8sBin = "SVCNET_K8S_BIN"
	// EnvEtcd overrides the etcd binary (default: etcd on PATH, then /usr/bin/etcd).
	EnvEtcd = kubecluster.EnvEtcd
	// buildTimeout bounds tools/k8s/build.sh: a first build takes minutes on 2 cores.
	buildTimeout = 30 * time.Minute
)

// requireRoot reports whether SVCNET_REQUIRE_ROOT is set (to anything non-empty).
func requireRoot() bool { return os.Getenv(EnvRequireRoot) != "" }

// Binaries applies the kube tier's skip rules (see the package doc), then returns
// the etcd binary and a directory holding every command in cmds (from
// SVCNET_K8S_BIN, else built by tools/k8s/build.sh, cached). A missing one fails t.
// It is for tests that start a control plane themselves (with kubecluster) rather
// than with Start.
func Binaries(t testing.TB, cmds ...string) (etcdBin, binDir string) {
	t.Helper()
	etcdBin = checkTier(t)
	binDir, err := k8sBinDir(cmds...)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return etcdBin, binDir
}

// checkTier applies the house rule before anything is started: a kube-tier test
// skips only when SVCNET_REQUIRE_ROOT is unset and it is either not root or asked
// for the unit tier alone (-short). Otherwise a missing prerequisite fails it. It
// returns the etcd binary's path.
func checkTier(t testing.TB) string {
	t.Helper()
	if !requireRoot() {
		if testing.Short() {
			t.Skip("kube tier: skipped with -short")
		}
		if os.Geteuid() != 0 {
			t.Skipf("kube tier: not root and %s unset", EnvRequireRoot)
		}
	}
	etcd, err := kubecluster.FindEtcd()
	if err != nil {
		t.Fatalf("kube tier: %v (install Debian etcd-server: make deps)", err)
	}
	return etcd
}

// repoRoot walks up from the working directory to the go.mod of module
// github.com/svcnet/svcnet.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo root: %w", err)
	}
	for {
		if isRepoGoMod(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repo root: no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func isRepoGoMod(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "module" && f[1] == modulePath {
			return true
		}
	}
	return false
}

// binaries caches the directory found per set of commands, so one test binary runs
// the build script at most once per set.
var binaries struct {
	mu  sync.Mutex
	dir map[string]string
}

// k8sBinDir returns a directory that holds every command in cmds, from
// SVCNET_K8S_BIN or by running tools/k8s/build.sh (cached, flock'ed; a first build
// takes minutes).
func k8sBinDir(cmds ...string) (string, error) {
	if dir := os.Getenv(EnvK8sBin); dir != "" {
		return dir, checkBinaries(dir, cmds)
	}
	key := strings.Join(cmds, " ")
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if dir, ok := binaries.dir[key]; ok {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "tools/k8s/build.sh"), cmds...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tools/k8s/build.sh %s: %w\n%s", key, err, process.LastLines(stderr.String(), 30))
	}
	dir := strings.TrimSpace(process.LastLines(stdout.String(), 1))
	if err := checkBinaries(dir, cmds); err != nil {
		return "", fmt.Errorf("tools/k8s/build.sh %s printed %q: %w", key, dir, err)
	}
	if binaries.dir == nil {
		binaries.dir = map[string]string{}
	}
	binaries.dir[key] = dir
	return dir, nil
}

func checkBinaries(dir string, cmds []string) error {
	for _, c := range cmds {
		fi, err := os.Stat(filepath.Join(dir, c))
		if err != nil {
			return fmt.Errorf("k8s binaries: %w", err)
		}
		if fi.Mode()&0o111 == 0 {
			return fmt.Errorf("k8s binaries: %s is not executable", filepath.Join(dir, c))
		}
	}
	return nil
}

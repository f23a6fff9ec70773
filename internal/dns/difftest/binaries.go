package difftest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/svcnet/svcnet/internal/testbin"
)

const (
	// EnvCoreDNSBin names a directory holding the binary `coredns`; when set,
	// tools/coredns/build.sh is not run (make test sets it).
	EnvCoreDNSBin = "SVCNET_COREDNS_BIN"
	// coreDNSBuildTimeout bounds tools/coredns/build.sh: a first build takes about
	// 2 minutes on 2 cores, a cached one milliseconds.
	coreDNSBuildTimeout = 15 * time.Minute
)

// coreDNS caches the path found, so one test binary runs the build script once.
var coreDNS struct {
	mu   sync.Mutex
	path string
}

// CoreDNSBinary returns the path of a CoreDNS binary built from the Go module
// github.com/coredns/coredns: $SVCNET_COREDNS_BIN/coredns, else the one
// tools/coredns/build.sh prints the directory of (cached outside the tree;
// minutes the first time). It fails when neither yields an executable.
func CoreDNSBinary() (string, error) {
	if dir := os.Getenv(EnvCoreDNSBin); dir != "" {
		return checkExecutable(filepath.Join(dir, "coredns"))
	}
	coreDNS.mu.Lock()
	defer coreDNS.mu.Unlock()
	if coreDNS.path != "" {
		return coreDNS.path, nil
	}
	root, err := testbin.ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("coredns binary: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), coreDNSBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "tools/coredns/build.sh"))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tools/coredns/build.sh: %w\n%s", err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	path, err := checkExecutable(filepath.Join(strings.TrimSpace(lines[len(lines)-1]), "coredns"))
	if err != nil {
		return "", fmt.Errorf("tools/coredns/build.sh printed %q: %w", stdout.String(), err)
	}
	coreDNS.path = path
	return path, nil
}

// SvcnetBinary returns the svcnet binary to run: the file named by env when that
// variable is set, else ./cmd/svcnet of this module built into dir.
func SvcnetBinary(env, dir string) (string, error) { return testbin.FromEnv(env, dir) }

func checkExecutable(path string) (string, error) { return testbin.Executable(path) }

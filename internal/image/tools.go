package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/svcnet/svcnet/internal/process"
)

// The environment variables the test tiers already use to hand in prebuilt
// binaries instead of running the build scripts.
const (
	// EnvK8sBin names a directory holding the Kubernetes commands
	// (tools/k8s/build.sh's output).
	EnvK8sBin = "SVCNET_K8S_BIN"
	// EnvCoreDNSBin names a directory holding coredns
	// (tools/coredns/build.sh's output).
	EnvCoreDNSBin = "SVCNET_COREDNS_BIN"
)

// scriptDir runs the build script at root/script with args (tools/k8s/build.sh
// and tools/coredns/build.sh print the directory of what they built, cached,
// on their last line) and returns that directory, after checking that it
// holds each of want as an executable.
func scriptDir(ctx context.Context, root, script string, args []string, want ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, script), args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", script, strings.Join(args, " "), err, process.LastLines(stderr.String(), 20))
	}
	dir := strings.TrimSpace(process.LastLines(stdout.String(), 1))
	if err := executables(dir, want...); err != nil {
		return "", fmt.Errorf("%s printed %q: %w", script, dir, err)
	}
	return dir, nil
}

// executables fails unless dir holds each of names as an executable file.
func executables(dir string, names ...string) error {
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", filepath.Join(dir, n))
		}
	}
	return nil
}

// k8sModuleDir is the directory of the module k8s.io/kubernetes that tools/k8s
// builds from (downloaded into the module cache if missing).
func k8sModuleDir(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join(root, "tools", "k8s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m k8s.io/kubernetes in tools/k8s: %w\n%s", err, process.LastLines(stderr.String(), 10))
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m k8s.io/kubernetes in tools/k8s: module not downloaded")
	}
	return dir, nil
}

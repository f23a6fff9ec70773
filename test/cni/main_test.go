// Package cni_test drives `svcnet cni` as a container runtime does, through
// the reference runtime tool cnitool (libcni): the real svcnet binary,
// symlinked as "svcnet" and hard-linked as "loopback" into a CNI_PATH
// directory (or installed by `svcnet cni install` from a Node of a real
// apiserver), a conflist in a NETCONFPATH directory, and `ip netns exec NODE
// cnitool add|check|del|gc|status NETWORK /run/netns/POD` with CAP_ARGS for
// portMappings, in throwaway node, pod and outside namespaces, with real
// traffic.
//
// cnitool is found through SVCNET_CNITOOL or at <module root>/.cache/bin/cnitool
// (hack/install-deps.sh installs it); without it the tests skip, or fail
// when SVCNET_REQUIRE_ROOT is set. libcni caches results under /var/lib/cni:
// every cnitool runs in a private mount namespace whose /var/lib is a
// directory of the test, so the host's cache is never read or written.
//
// Run as root: SVCNET_REQUIRE_ROOT=1 go test -count=1 ./test/cni/. TestMain
// builds ./cmd/svcnet once.
package cni_test

import (
	"github.com/svcnet/svcnet/internal/testbin"

	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

var (
	// cniPath is the CNI_PATH directory holding the plugin "svcnet".
	cniPath string
	// svcnetBin is the built binary the plugin symlink points to.
	svcnetBin string
	// buildErr is why the binary could not be built.
	buildErr error
	// moduleRoot is the directory of go.mod.
	moduleRoot string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "svcnet-cni-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	moduleRoot, err = testbin.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if netnstest.Skipped() {
		buildErr = fmt.Errorf("not built: the kernel tier is skipped")
		return m.Run()
	}
	svcnetBin = filepath.Join(dir, "build", "svcnet")
	cniPath = filepath.Join(dir, "cni-bin")
	buildErr = build(svcnetBin, cniPath)
	return m.Run()
}

// build compiles ./cmd/svcnet into bin and installs it in pathDir as the
// lab does, a symlink named svcnet, and as `svcnet cni install` makes the
// loopback plugin: a hard link named loopback.
func build(bin, pathDir string) error {
	if err := testbin.Build(bin); err != nil {
		return err
	}
	if err := os.MkdirAll(pathDir, 0o755); err != nil {
		return err
	}
	if err := os.Link(bin, filepath.Join(pathDir, "loopback")); err != nil {
		return err
	}
	return os.Symlink(bin, filepath.Join(pathDir, "svcnet"))
}

// needTools applies the kernel tier's rule and returns cnitool's path: the
// test fails when the binary was not built, and when cnitool is missing it
// skips, or fails if SVCNET_REQUIRE_ROOT is set.
func needTools(t *testing.T) string {
	t.Helper()
	netnstest.RequireRoot(t)
	if buildErr != nil {
		t.Fatalf("binary under test: %v", buildErr)
	}
	tool := os.Getenv("SVCNET_CNITOOL")
	if tool == "" {
		tool = filepath.Join(moduleRoot, ".cache", "bin", "cnitool")
	}
	if _, err := os.Stat(tool); err != nil {
		if os.Getenv(netnstest.EnvRequireRoot) != "" {
			t.Fatalf("cnitool: %v (run hack/install-deps.sh or set SVCNET_CNITOOL)", err)
		}
		t.Skipf("cnitool: %v (run hack/install-deps.sh or set SVCNET_CNITOOL)", err)
	}
	return tool
}

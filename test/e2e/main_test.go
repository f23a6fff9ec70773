// Package e2e is the end-to-end tier: Kubernetes' Service e2e tests, ported in
// intent, run against a real lab (internal/lab: network namespaces, svcnet proxy on
// every node, pods wired by svcnet's CNI plugin), once on each control plane.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/testbin"
)

// svcnetBin is the svcnet binary built for this run; every lab process runs it.
// Every test of the tier starts with netnstest.RequireRoot, so when that skips
// (-short, or not root) the binary is not built.
var svcnetBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "svcnet-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	svcnetBin = filepath.Join(dir, "svcnet")
	flag.Parse()
	if netnstest.Skipped() {
		return m.Run()
	}
	if err := testbin.Build(svcnetBin); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

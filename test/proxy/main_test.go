// Package proxy_test holds the kernel-tier and kube-tier tests of `svcnet
// proxy`: the real binary, real kernel rules, real TCP/UDP/SCTP traffic, in
// throwaway network namespaces. The proxy runs on the data plane
// $SVCNET_DATA_PLANE names (svcnet proxy's default when unset); the traffic
// and what it must do are the same on every plane, and what a test reads
// or breaks in the kernel goes through the plane's view
// (planeview_test.go).
//
// Topology (one per test, see topology_test.go): a "node" namespace runs the
// proxy as node1; a "client" namespace is an external client on the node's
// link (172.26.236.0/24); every pod is its own namespace with a point-to-point
// veth to the node (pod 192.168.1.x/32 and fd00:192:168:1::x/128, gateway
// 192.168.1.1 / fd00:192:168:1::1, Calico-style routes), so all pod traffic,
// even between pods, is routed through the node and seen by its conntrack.
// A pod "on another node" is simulated by giving its endpoint nodeName node2
// in the manifests while it stays reachable from node1 directly.
//
// Run as root with SVCNET_REQUIRE_ROOT=1 (and SVCNET_K8S_BIN for the kube
// tier): go test -count=1 ./test/proxy/. TestMain builds ./cmd/svcnet once;
// SVCNET_PROXY_TEST_BIN names a prebuilt binary to test instead.
package proxy_test

import (
	"github.com/svcnet/svcnet/internal/testbin"

	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// svcnetBin is the binary under test, built once by TestMain; buildErr is
// why it could not be built (every test that needs it then fails).
var (
	svcnetBin string
	buildErr  error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// envBin names a prebuilt binary to test instead of building ./cmd/svcnet.
const envBin = "SVCNET_PROXY_TEST_BIN"

func run(m *testing.M) int {
	if bin := os.Getenv(envBin); bin != "" {
		svcnetBin = bin
		if _, err := os.Stat(bin); err != nil {
			buildErr = fmt.Errorf("%s: %w", envBin, err)
		}
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "svcnet-proxy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	svcnetBin = filepath.Join(dir, "svcnet")
	flag.Parse()
	if netnstest.Skipped() {
		// Every test that runs the binary skips: do not build it.
		buildErr = fmt.Errorf("not built: the kernel tier is skipped")
		return m.Run()
	}
	buildErr = testbin.Build(svcnetBin)
	return m.Run()
}

// needBinary skips t by the kernel tier's rules, and fails it when the
// binary under test could not be built.
func needBinary(t testing.TB) {
	t.Helper()
	netnstest.RequireRoot(t)
	if buildErr != nil {
		t.Fatalf("binary under test: %v", buildErr)
	}
}

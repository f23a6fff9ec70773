// Package netnstest gives kernel-tier tests throwaway network namespaces that
// are removed when the test ends, pass or fail.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
)

// EnvRequireRoot, when set, turns a skip for a missing prerequisite into a failure.
const EnvRequireRoot = "SVCNET_REQUIRE_ROOT"

// RequireRoot applies the house rule for kernel-tier tests: skip only when not
// root (or -short) and SVCNET_REQUIRE_ROOT is unset; otherwise fail if not root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if Skipped() {
		if testing.Short() {
			t.Skip("kernel tier: skipped with -short")
		}
		t.Skipf("kernel tier: not root and %s unset", EnvRequireRoot)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("kernel tier: needs root (%s is set)", EnvRequireRoot)
	}
}

// Skipped reports whether RequireRoot skips: SVCNET_REQUIRE_ROOT is unset and
// the run is -short or not root. A TestMain calls it (after flag.Parse) to
// leave out setup, such as building svcnet, that only skipped tests need.
func Skipped() bool {
	return os.Getenv(EnvRequireRoot) == "" && (testing.Short() || os.Geteuid() != 0)
}

var seq atomic.Uint64

// New creates a named namespace "sn-<role>-<pid>-<n>" (at most 15 bytes of role)
// and deletes it when the test ends.
func New(t testing.TB, role string) *netns.NS {
	t.Helper()
	RequireRoot(t)
	if len(role) > 15 {
		role = role[:15]
	}
	name := fmt.Sprintf("sn-%s-%d-%d", role, os.Getpid(), seq.Add(1))
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("netns cleanup: %v", err)
		}
	})
	return ns
}

// HostNetworkState is what a test that makes namespaces must leave as it
// found it in the host's network namespace: its addresses, routes (every
// table), rules and nftables ruleset, as ip and nft print them. Compare a
// call before with one after.
func HostNetworkState(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, argv := range [][]string{{"ip", "-br", "addr"}, {"ip", "route", "show", "table", "all"}, {"ip", "rule"}, {"nft", "list", "ruleset"}} {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(argv, " "), out)
	}
	return b.String()
}

// Package benchenv reads the environment that gates and tunes svcnet's
// benchmarks (make bench-*): one place for the gate, the svcnet binary and the
// numeric knobs, so every benchmark refuses a bad value the same way.
package benchenv

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/testbin"
)

const (
	// Bench gates every benchmark: without it a benchmark skips, so that
	// `make test` (go test ./...) does not run them.
	Bench = "SVCNET_BENCH"
	// Svcnet names the svcnet binary a benchmark runs (make bench-* builds it).
	Svcnet = "SVCNET_BENCH_SVCNET"
)

// Gate skips t unless Bench is set; make names the make target that runs it.
func Gate(t *testing.T, make string) {
	t.Helper()
	if os.Getenv(Bench) == "" {
		t.Skipf("benchmark: set %s=1 to run it (make %s)", Bench, make)
	}
}

// RootGate is Gate, then the root requirement of the kernel tiers.
func RootGate(t *testing.T, make string) {
	t.Helper()
	Gate(t, make)
	netnstest.RequireRoot(t)
}

// SvcnetBinary returns the svcnet binary named by Svcnet (make bench-* sets it
// to the one it built) or, when Svcnet is unset, one built from this tree into
// t's temporary directory. A name that is not an executable file fails t.
func SvcnetBinary(t *testing.T) string {
	t.Helper()
	bin, err := testbin.FromEnv(Svcnet, t.TempDir())
	if err != nil {
		t.Fatalf("%s: %v", Svcnet, err)
	}
	return bin
}

// Int returns the environment variable key as an integer of at least min, or
// def when it is unset; any other value fails t, naming key.
func Int(t *testing.T, key string, def, min int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		t.Fatalf("%s=%q: want a whole number of at least %d", key, v, min)
	}
	return n
}

// Duration returns the environment variable key as a positive duration, or def
// when it is unset; any other value fails t, naming key.
func Duration(t *testing.T, key string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 10s", key, v)
	}
	return d
}

// Sizes returns the environment variable key as a comma-separated list of
// positive whole numbers, sorted and without repeats, or def's when it is
// unset; any other value fails t, naming key.
func Sizes(t *testing.T, key, def string) []int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		v = def
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: bad size %q: want positive whole numbers, comma-separated", key, v, s)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

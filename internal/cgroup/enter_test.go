package cgroup

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func TestV2Path(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"12:cpu,cpuacct:/x\n1:name=systemd:/user.slice\n0::/user.slice/session-1.scope\n", "/user.slice/session-1.scope"},
		{"0::/\n", "/"},
	} {
		if got, err := v2Path(tc.in); err != nil || got != tc.want {
			t.Errorf("v2Path(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"1:name=systemd:/x\n", "0::relative\n"} {
		if got, err := v2Path(bad); err == nil {
			t.Errorf("v2Path(%q) = %q, want an error", bad, got)
		}
	}
}

// TestEnter moves the test process into a child cgroup and back.
func TestEnter(t *testing.T) {
	netnstest.RequireRoot(t)
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Child(root, fmt.Sprintf("svcnet-entertest-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if err := Make(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Remove(dir, 5*time.Second); err != nil {
			t.Error(err)
		}
	})
	back, err := Enter(dir)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := Pids(dir)
	if berr := back(); berr != nil {
		t.Fatal(berr)
	}
	if err != nil || !slices.Contains(pids, os.Getpid()) {
		t.Fatalf("after Enter, %s holds %v (%v), want this process %d", dir, pids, err, os.Getpid())
	}
	if pids, err := Pids(dir); err != nil || len(pids) != 0 {
		t.Fatalf("after moving back, %s holds %v (%v), want none", dir, pids, err)
	}
}

// Package cgrouptest gives kernel-tier tests a throwaway cgroup v2 directory,
// a dedicated child of the unified hierarchy that is removed when the test
// ends, pass or fail. Tests attach BPF programs there, never to the root.
package cgrouptest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

var seq atomic.Uint64

// New creates <cgroup v2 root>/svcnet-test-<pid>-<n> (the root found by
// cgroup.Root) and removes it when the test ends (after the cleanups
// registered later, such as detaching programs; the processes put in it must
// have exited by then, within a second). It skips or fails as
// netnstest.RequireRoot does, and fails when no cgroup2 file system is
// mounted.
func New(t testing.TB) string {
	t.Helper()
	netnstest.RequireRoot(t)
	root, err := cgroup.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := cgroup.Child(root, fmt.Sprintf("svcnet-test-%d-%d", os.Getpid(), seq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := cgroup.Remove(dir, time.Second); err != nil {
			t.Errorf("cgroup cleanup: %v", err)
		}
	})
	return dir
}

// Open returns a descriptor of the cgroup dir for SysProcAttr.CgroupFD, so a
// child starts inside it (clone3 CLONE_INTO_CGROUP); it is closed when the
// test ends.
func Open(t testing.TB, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("cgroup: open %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// Path returns the cgroup v2 path of dir, a cgroup New made (/svcnet-test-…),
// as svcnet proxy --cgroup takes it.
func Path(t testing.TB, dir string) string {
	t.Helper()
	root, err := cgroup.Root()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cgroup.Path(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// BPFFS mounts a BPF filesystem on a fresh directory for the test and
// unmounts it when the test ends (after the cleanups registered later), so
// pins never outlive the test.
func BPFFS(t testing.TB) string {
	t.Helper()
	netnstest.RequireRoot(t)
	dir, err := os.MkdirTemp("", "svcnet-bpffs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(dir)
		t.Fatalf("mount bpf on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// Package cgrouptest gives kernel-tier tests a throwaway cgroup v2 directory,
// a dedicated child of the unified hierarchy that is removed when the test
// ends, pass or fail. Tests attach BPF programs there, never to the root.
package cgrouptest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// Root is the cgroup v2 mount under which test cgroups are made.
const Root = "/sys/fs/cgroup/unified"

var seq atomic.Uint64

// New creates Root/svcnet-test-<pid>-<n> and removes it when the test ends
// (after the cleanups registered later, such as detaching programs; the
// processes put in it must have exited by then). It skips or fails as
// netnstest.RequireRoot does, and fails when Root is no cgroup2 mount.
func New(t testing.TB) string {
	t.Helper()
	netnstest.RequireRoot(t)
	var st unix.Statfs_t
	if err := unix.Statfs(Root, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Fatalf("cgroup: %s is no cgroup2 mount (statfs: %v)", Root, err)
	}
	dir := filepath.Join(Root, fmt.Sprintf("svcnet-test-%d-%d", os.Getpid(), seq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := remove(dir); err != nil {
			t.Errorf("cgroup cleanup: %v", err)
		}
	})
	return dir
}

// remove deletes the cgroup dir, waiting a bounded time for exiting processes
// to leave it.
func remove(dir string) error {
	var err error
	for range 50 {
		err = os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return fmt.Errorf("remove %s: %w (processes: %q)", dir, err, procs)
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
	p, err := cgroup.Path(Root, dir)
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

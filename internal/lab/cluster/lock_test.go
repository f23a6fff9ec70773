package cluster

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestLockFileRemovedUnderAWaiter (the lock lives under /run/svcnet/lab,
// hence root): a holder removes the lock file (as Down does) and releases
// it while another command waits on that file; the waiter then holds the
// lock of the file now at the path, so a third command is kept out, and
// once it too removes the file nothing of the lab is left.
func TestLockFileRemovedUnderAWaiter(t *testing.T) {
	netnstest.RequireRoot(t)
	n := topology.Names{Lab: fmt.Sprintf("lockt%d", os.Getpid()%100000)}
	t.Cleanup(func() { _ = os.Remove(lockPath(n)) })
	unlock, err := Lock(n)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(lockPath(n))
	if err != nil {
		unlock()
		t.Fatal(err)
	}
	ino := st.Sys().(*syscall.Stat_t).Ino

	type locked struct {
		unlock func()
		err    error
	}
	waiter := make(chan locked, 1)
	go func() {
		u, err := Lock(n)
		waiter <- locked{u, err}
	}()
	// The waiter is blocked on the file's lock once the kernel lists it
	// waiting ("->") on that inode.
	deadline := time.Now().Add(5 * time.Second)
	for !flockWaiter(t, ino) {
		if time.Now().After(deadline) {
			unlock()
			t.Fatal("the second Lock never waited on the lock file")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := RemoveLock(n); err != nil {
		unlock()
		t.Fatal(err)
	}
	unlock()

	var w locked
	select {
	case w = <-waiter:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not take the lock after the holder released it")
	}
	if w.err != nil {
		t.Fatalf("the waiter's Lock: %v", w.err)
	}
	if _, err := os.Stat(lockPath(n)); err != nil {
		w.unlock()
		t.Fatalf("the waiter holds the lock but no lock file is at the path: %v", err)
	}
	if u, err := TryLock(n, 50*time.Millisecond); !errors.Is(err, ErrBusy) {
		if err == nil {
			u()
		}
		w.unlock()
		t.Fatalf("TryLock while the waiter holds the lock: %v, want ErrBusy", err)
	}
	if err := RemoveLock(n); err != nil {
		t.Fatal(err)
	}
	w.unlock()
	if _, err := os.Stat(lockPath(n)); !os.IsNotExist(err) {
		t.Errorf("the lock file is still there after its removal: %v", err)
	}
}

// flockWaiter reports whether /proc/locks lists a process waiting for a
// flock of inode ino.
func flockWaiter(t *testing.T, ino uint64) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[1] != "->" || f[2] != "FLOCK" {
			continue
		}
		dev := strings.Split(f[6], ":")
		if got, err := strconv.ParseUint(dev[len(dev)-1], 10, 64); err == nil && got == ino {
			return true
		}
	}
	return false
}

package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestDownLeavesNoLockFile (root: the lab's files are under
// /run/svcnet/lab): Down of a lab, here one that was never up, as after a
// crash, leaves neither its state directory nor its lock file, and doing
// it again is fine.
func TestDownLeavesNoLockFile(t *testing.T) {
	netnstest.RequireRoot(t)
	name := fmt.Sprintf("downt%d", os.Getpid()%100000)
	n := topology.Names{Lab: name}
	lock := filepath.Join(topology.RunRoot, name+".lock")
	t.Cleanup(func() { _ = os.Remove(lock); _ = os.RemoveAll(n.Dir()) })
	if err := os.MkdirAll(n.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := Down(name); err != nil {
			t.Fatalf("Down %d: %v", i+1, err)
		}
		for _, p := range []string{lock, n.Dir()} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("after Down %d: %s: %v, want it gone", i+1, p, err)
			}
		}
	}
}

// TestOpenNoLabLeavesNoLockFile: a command on a lab that is not up (lab get,
// a completion) fails with ErrNoLab and leaves no lock file behind.
func TestOpenNoLabLeavesNoLockFile(t *testing.T) {
	netnstest.RequireRoot(t)
	name := fmt.Sprintf("nolab%d", os.Getpid()%100000)
	lock := filepath.Join(topology.RunRoot, name+".lock")
	t.Cleanup(func() { _ = os.Remove(lock) })
	for _, open := range []func() (*Lab, error){
		func() (*Lab, error) { return Open(context.Background(), name) },
		func() (*Lab, error) { return OpenWait(context.Background(), name, time.Second) },
	} {
		if l, err := open(); !errors.Is(err, cluster.ErrNoLab) {
			if l != nil {
				l.Close()
			}
			t.Fatalf("open of a lab that is not up: %v, want ErrNoLab", err)
		}
		if _, err := os.Stat(lock); !os.IsNotExist(err) {
			t.Errorf("after the open: %s: %v, want it gone", lock, err)
		}
	}
}

package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestMakeStartRemove makes a child cgroup, starts a process into it, and
// checks that Remove waits for it, names it while it runs, and removes the
// directory once it has exited.
func TestMakeStartRemove(t *testing.T) {
	netnstest.RequireRoot(t)
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Child(root, fmt.Sprintf("svcnet-cgtest-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if err := Make(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Remove(dir, 2*time.Second) })
	if err := Make(dir); err != nil {
		t.Errorf("Make over an existing dir: %v", err)
	}
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })

	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0::/" + filepath.Base(dir) + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("/proc/%d/cgroup = %q, want the line %q", cmd.Process.Pid, b, want)
	}
	pids, err := Pids(dir)
	if err != nil || len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Errorf("Pids = %v, %v; want [%d]", pids, err, cmd.Process.Pid)
	}
	err = Remove(dir, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), fmt.Sprint(cmd.Process.Pid)) {
		t.Errorf("Remove with a process in it = %v, want an error naming %s and pid %d", err, dir, cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	<-done
	if err := Remove(dir, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", dir, err)
	}
	if err := Remove(dir, time.Second); err != nil {
		t.Errorf("Remove of a removed dir: %v", err)
	}
}

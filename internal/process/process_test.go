package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStopReachesTheGroup(t *testing.T) {
	// sh forks a sleep; stopping the group must end both.
	p, err := Start(exec.Command("sh", "-c", "sleep 30 & wait"))
	if err != nil {
		t.Fatal(err)
	}
	if done, _ := p.Exited(); done {
		t.Fatal("exited at once")
	}
	if err := p.Stop(5*time.Second, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// Stop waits for the child it started; the rest of the group got the same
	// signal and goes within moments (it is reaped by init, not by us).
	gone := false
	for i := 0; i < 100 && !gone; i++ {
		gone = syscall.Kill(-p.Pid(), 0) != nil
		time.Sleep(20 * time.Millisecond)
	}
	if !gone {
		t.Fatal("process group still alive 2s after Stop")
	}
	if done, err := p.Exited(); !done || err == nil {
		t.Fatalf("Exited = %v, %v", done, err)
	}
	if err := p.Stop(time.Second, time.Second); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestKillAfterGraceWhenTermIgnored(t *testing.T) {
	p, err := Start(exec.Command("sh", "-c", "trap '' TERM; sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	if err := p.Stop(200*time.Millisecond, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Err().Error(), "killed") {
		t.Fatalf("want SIGKILL, got %v", p.Err())
	}
}

// A child must survive the retirement of threads: a goroutine that exits
// while locked kills its thread, which must not be the one that forked.
func TestSurvivesRetiredThreads(t *testing.T) {
	p, err := Start(exec.Command("sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(5 * time.Second)
	for range 50 {
		done := make(chan struct{})
		go func() { runtime.LockOSThread(); close(done) }() // exits locked: thread retired
		<-done
	}
	time.Sleep(100 * time.Millisecond)
	if done, err := p.Exited(); done {
		t.Fatalf("child died with the retired threads: %v", err)
	}
}

func TestStartError(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/binary")); err == nil {
		t.Fatal("want an error")
	}
}

func TestLogTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := LogTail(p, 2); got != "b\nc" {
		t.Errorf("LogTail(2) = %q, want %q", got, "b\nc")
	}
	if got := LogTail(p, 10); got != "a\nb\nc" {
		t.Errorf("LogTail(10) = %q", got)
	}
	if got := LogTail(filepath.Join(t.TempDir(), "none"), 2); !strings.Contains(got, "no such file") {
		t.Errorf("missing file: %q, want the read error", got)
	}
}

func TestCheckExecutable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "exe")
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckExecutable(exe); err != nil {
		t.Errorf("%s: %v", exe, err)
	}
	for p, want := range map[string]string{
		plain:                        "not an executable file",
		dir:                          "not an executable file",
		filepath.Join(dir, "absent"): "no such file",
	} {
		if err := CheckExecutable(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", p, err, want)
		}
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 1, "c"},
		{"a\nb\n\n", 5, "a\nb"},
		{"", 3, ""},
		{"/out/dir\n", 1, "/out/dir"},
	} {
		if got := LastLines(tc.s, tc.n); got != tc.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestStatTicks(t *testing.T) {
	// A command name with spaces and a parenthesis; utime 1234, stime 56.
	stat := "4242 (kube proxy) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 12 0 100 1000 200"
	n, err := statTicks(stat)
	if err != nil || n != 1290 {
		t.Errorf("statTicks = %d, %v; want 1290", n, err)
	}
	for _, bad := range []string{"", "4242 kube-proxy S 1", "1 (x) S 1 2"} {
		if _, err := statTicks(bad); err == nil {
			t.Errorf("statTicks(%q): no error", bad)
		}
	}
}

func TestCPUTime(t *testing.T) {
	d, err := CPUTime(os.Getpid())
	if err != nil || d < 0 {
		t.Errorf("CPUTime(self) = %v, %v", d, err)
	}
	if _, err := CPUTime(-1); err == nil {
		t.Error("CPUTime(-1): no error")
	}
}

package process

import (
	"os/exec"
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

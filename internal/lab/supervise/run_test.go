package supervise

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// These tests run real child processes (sleep, sh) as the lab runs its
// agents; they need no root.

// events collects Run's events on a channel.
func events() (chan Event, func(Event)) {
	ch := make(chan Event, 100)
	return ch, func(e Event) { ch <- e }
}

// next returns the next event, failing t when none comes within limit.
func next(t *testing.T, ch chan Event, limit time.Duration) Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(limit):
		t.Fatalf("no event within %v", limit)
	}
	return Event{}
}

// start runs Run in the background; the returned func cancels it and waits
// (bounded) for it to return.
func start(t *testing.T, cfg Config) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	stopped := false
	stopFn := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return within 10s of its context's end")
		}
	}
	t.Cleanup(stopFn)
	return stopFn
}

func TestRunRestartsKilledChildAtOnce(t *testing.T) {
	ch, ev := events()
	stop := start(t, Config{Argv: []string{"sleep", "30"}, Events: ev, Log: klog.Background()})
	first := next(t, ch, 5*time.Second)
	if first.Kind != Started || first.PID == 0 {
		t.Fatalf("first event %+v, want Started", first)
	}
	killed := time.Now()
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ex := next(t, ch, 5*time.Second)
	if ex.Kind != Exited || ex.Exit.Signal != syscall.SIGKILL || ex.Exit.Code != 137 || ex.Exit.Reason() != "Error" {
		t.Fatalf("after kill -9: %+v (exit %+v), want Exited by SIGKILL, code 137, reason Error", ex, ex.Exit)
	}
	again := next(t, ch, 5*time.Second)
	took := time.Since(killed)
	if again.Kind != Started || again.PID == first.PID {
		t.Fatalf("after the exit: %+v, want Started with a new pid", again)
	}
	t.Logf("killed pid %d; pid %d started %v later", first.PID, again.PID, took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("first restart took %v, want under 1s", took)
	}
	stop()
	if alive(again.PID) {
		t.Errorf("child %d still runs after Run returned", again.PID)
	}
	select {
	case e := <-ch:
		if e.Kind == Started {
			t.Errorf("a child was started after the stop: %+v", e)
		}
	default:
	}
}

// A child that exits at once is restarted at once, then after the back-off
// (here 100 ms doubling to 400 ms), each start announced by BackingOff.
func TestRunBacksOffACrashLoop(t *testing.T) {
	ch, ev := events()
	start(t, Config{Argv: []string{"sh", "-c", "exit 3"}, Events: ev, Log: klog.Background(),
		Backoff: NewBackoff(100*time.Millisecond, 400*time.Millisecond, nil)})
	want := []time.Duration{0, 100, 200, 400, 400}
	var exited time.Time
	for i := 0; i <= len(want); i++ {
		e := next(t, ch, 5*time.Second)
		if e.Kind != Started {
			t.Fatalf("event %+v, want Started", e)
		}
		if i > 0 {
			gap := e.At.Sub(exited)
			w := want[i-1] * time.Millisecond
			t.Logf("start %d: %v after the exit (back-off %v)", i+1, gap.Round(time.Millisecond), w)
			// Later is allowed for a loaded machine; earlier never.
			if gap < w-5*time.Millisecond || gap > w+time.Second {
				t.Errorf("start %d came %v after the exit, want %v", i+1, gap, w)
			}
		}
		e = next(t, ch, 5*time.Second)
		if e.Kind != Exited || e.Exit.Code != 3 || e.Exit.Signal != 0 || e.Exit.Reason() != "Error" {
			t.Fatalf("event %+v (exit %+v), want Exited with status 3", e, e.Exit)
		}
		exited = e.Exit.FinishedAt
		if i < len(want) && want[i] > 0 {
			if b := next(t, ch, 5*time.Second); b.Kind != BackingOff || b.Backoff != want[i]*time.Millisecond {
				t.Fatalf("event %+v, want BackingOff of %v", b, want[i]*time.Millisecond)
			}
		}
	}
}

func TestRunReportsStartErrors(t *testing.T) {
	ch, ev := events()
	start(t, Config{Argv: []string{filepath.Join(t.TempDir(), "missing")}, Events: ev, Log: klog.Background(),
		Backoff: NewBackoff(50*time.Millisecond, 50*time.Millisecond, nil)})
	e := next(t, ch, 5*time.Second)
	if e.Kind != Exited || e.Exit.StartErr == nil || e.Exit.Code != 128 || e.Exit.Reason() != "StartError" {
		t.Fatalf("event %+v (exit %+v), want Exited with a StartError", e, e.Exit)
	}
	if e = next(t, ch, 5*time.Second); e.Kind != Exited {
		t.Fatalf("second event %+v, want another immediate attempt", e)
	}
	if e = next(t, ch, 5*time.Second); e.Kind != BackingOff {
		t.Fatalf("third event %+v, want BackingOff", e)
	}
}

// A child that ignores SIGTERM is killed after StopGrace.
func TestRunStopKillsAfterGrace(t *testing.T) {
	ch, ev := events()
	stop := start(t, Config{Argv: []string{"sh", "-c", `trap "" TERM; exec sleep 30`}, Events: ev, Log: klog.Background(),
		StopGrace: 300 * time.Millisecond})
	e := next(t, ch, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // let sh install the trap and exec
	t0 := time.Now()
	stop()
	took := time.Since(t0)
	if alive(e.PID) {
		t.Fatalf("child %d survived the stop", e.PID)
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("stop took %v, want the 300ms grace and then SIGKILL", took)
	}
}

// envHelper makes the test binary a supervisor of the command line it holds
// (space-separated), stopped by SIGTERM: the lab's `svcnet lab supervise`.
const envHelper = "SUPERVISE_TEST_HELPER_ARGV"

func TestHelperSupervisor(t *testing.T) {
	argv := os.Getenv(envHelper)
	if argv == "" {
		t.Skip("helper process for TestSIGTERMToSupervisorAndChildLeavesNothing")
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	if err := Run(ctx, Config{Argv: strings.Fields(argv), StopGrace: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
}

// `lab down` sends SIGTERM to every process of a namespace at once: the
// supervisor and its child. Whatever order they get it in, and even when the
// child's exit reaches the supervisor before its own signal does, no child is
// left once the supervisor has exited.
func TestSIGTERMToSupervisorAndChildLeavesNothing(t *testing.T) {
	for round := range 20 {
		// A sleep of a unique length marks this round's children in /proc.
		marker := fmt.Sprintf("1000.%d%02d", os.Getpid(), round)
		sup := exec.Command(os.Args[0], "-test.run=^TestHelperSupervisor$")
		sup.Env = append(os.Environ(), envHelper+"=sleep "+marker)
		if err := sup.Start(); err != nil {
			t.Fatal(err)
		}
		waited := make(chan struct{})
		go func() { _ = sup.Wait(); close(waited) }()
		child := waitChild(t, sup.Process.Pid, marker)
		if round%2 == 0 {
			_ = syscall.Kill(child, syscall.SIGTERM)
			_ = sup.Process.Signal(syscall.SIGTERM)
		} else {
			_ = sup.Process.Signal(syscall.SIGTERM)
			_ = syscall.Kill(child, syscall.SIGTERM)
		}
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = sup.Process.Kill()
			t.Fatalf("round %d: the supervisor did not exit within 10s of SIGTERM", round)
		}
		if left := withArg(marker); len(left) > 0 {
			for _, p := range left {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("round %d: children %v left after the supervisor exited", round, left)
		}
	}
}

// waitChild returns the pid of the process whose command line holds marker,
// a child of sup, waiting up to 5 s for it.
func waitChild(t *testing.T, sup int, marker string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range withArg(marker) {
			if ppid(p) == sup {
				return p
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no child of %d with %q after 5s", sup, marker)
	return 0
}

// withArg returns the live processes with arg in their command line.
func withArg(arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && alive(pid) && strings.Contains(string(b), "\x00"+arg) {
			out = append(out, pid)
		}
	}
	return out
}

// ppid returns the parent of pid (0 when unknown).
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

package netns_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// envVisitor names the namespace a visitor process (this test binary, run by
// TestPidsInSkipsVisitors) moves its main thread into.
const envVisitor = "SVCNET_NETNS_VISITOR"

// The main goroutine stays on the main thread, so the visitor's setns below
// moves the main thread alone, as a retired Do thread wedged there would be.
func init() {
	if os.Getenv(envVisitor) != "" {
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if path := os.Getenv(envVisitor); path != "" {
		os.Exit(visit(path))
	}
	os.Exit(m.Run())
}

// visit moves the main thread into the namespace at path, says so, and waits
// to be killed; the runtime's other threads stay in the original namespace.
func visit(path string) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("visiting")
	time.Sleep(time.Minute)
	return 0
}

// A process whose main thread is in a namespace while its other threads are
// not (a Go program with a wedged main thread) is not listed as the
// namespace's, though /proc/PID/ns/net shows the namespace: a lab's Down run
// by another process must not kill the test that dialed into the lab.
func TestPidsInSkipsVisitors(t *testing.T) {
	ns := netnstest.New(t, "visitor")
	v := exec.Command(os.Args[0])
	v.Env = append(os.Environ(), envVisitor+"="+ns.Path())
	out, err := v.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Process.Kill(); _ = v.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "visiting\n" {
		t.Fatalf("visitor: %q %v", line, err)
	}
	var nsSt, mainSt unix.Stat_t
	if err := unix.Stat(ns.Path(), &nsSt); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", v.Process.Pid), &mainSt); err != nil {
		t.Fatal(err)
	}
	if mainSt.Ino != nsSt.Ino {
		t.Fatal("the visitor's main thread is not in the namespace: the test proves nothing")
	}
	resident := ns.Command("sleep", "30")
	if err := resident.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resident.Process.Kill(); _ = resident.Wait() })
	for i := 0; ; i++ { // `ip netns exec` execs sleep; allow it to get there
		pids, err := netns.PidsIn(ns.Path())
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pids, v.Process.Pid) {
			t.Fatalf("the visitor (pid %d) is listed as the namespace's: %v", v.Process.Pid, pids)
		}
		if slices.Contains(pids, resident.Process.Pid) {
			return
		}
		if i == 50 {
			t.Fatalf("the resident (pid %d) is not listed: %v", resident.Process.Pid, pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package topology

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/process"
)

// Daemon says where, beyond its namespace, StartDaemon starts a process.
type Daemon struct {
	// Cgroup, when set, is the cgroup v2 directory the process starts in
	// (clone3 CLONE_INTO_CGROUP), so it and every child of it run there
	// from their first instruction; else it runs in the caller's cgroup.
	Cgroup string
}

// StartDaemon starts argv inside ns (and d's cgroup) as a daemon of the lab:
// in its own session (so it outlives the command that started it), stdin
// from /dev/null, stdout and stderr appended to logPath. It returns the pid.
// Nothing waits for it; Down finds it again by its namespace.
func StartDaemon(ns *netns.NS, logPath string, d Daemon, argv ...string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("start %s in %s: %w", argv[0], ns.Name(), err)
	}
	defer logf.Close()
	cmd := ns.Command(argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if d.Cgroup != "" {
		cg, err := cgroup.Open(d.Cgroup)
		if err != nil {
			return 0, fmt.Errorf("start %s in %s: %w", argv[0], ns.Name(), err)
		}
		defer cg.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.Fd())
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s in %s: %w", argv[0], ns.Name(), err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while this process still runs; afterwards init does.
	go func() { _ = cmd.Wait() }()
	return pid, nil
}

// Alive reports whether pid is running (and not a zombie).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] != 'Z'
		}
	}
	return false
}

// StopPids sends SIGTERM to every pid, waits up to grace for them to exit, then
// SIGKILLs the rest and waits up to a second more. It returns an error naming
// the pids still Alive after that.
func StopPids(pids []int, grace time.Duration) error {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	if WaitGone(pids, grace) {
		return nil
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if WaitGone(pids, time.Second) {
		return nil
	}
	var left []int
	for _, p := range pids {
		if Alive(p) {
			left = append(left, p)
		}
	}
	return fmt.Errorf("processes %v still running after SIGKILL", left)
}

func WaitGone(pids []int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		gone := true
		for _, p := range pids {
			if Alive(p) {
				gone = false
				break
			}
		}
		if gone {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StopNamespaceProcesses stops every process living in the named namespace,
// looking again after each stop: a supervisor (see Supervise) may start a
// child in the instant it is stopped (it then stops that child too before it
// exits, unless it is killed first), so the namespace is empty only when a
// look finds nothing. It gives up after StopRounds looks that found some.
func StopNamespaceProcesses(name string, grace time.Duration) error {
	if !netns.Exists(name) {
		return nil
	}
	for round := 0; ; round++ {
		pids, err := netns.PidsIn(netns.RunDir + "/" + name)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if round == StopRounds {
			return fmt.Errorf("namespace %s: processes %v still appear after %d stops", name, pids, StopRounds)
		}
		if err := StopPids(pids, grace); err != nil {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
}

// StopRounds bounds the stops of one namespace's processes.
const StopRounds = 3

// LogTail returns the last n lines of a log file, indented, for error messages.
func LogTail(path string, n int) string {
	return "  " + strings.ReplaceAll(process.LogTail(path, n), "\n", "\n  ") + "\n  (log: " + path + ")"
}

// Cmdline returns the command line of pid, or nil when it is gone.
func Cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

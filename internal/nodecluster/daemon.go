package nodecluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/process"
)

// daemon is one long-running process of a node (its namespace holder,
// containerd, the kubelet), with its output appended to its log.
type daemon struct {
	name    string
	logPath string
	pid     int
	done    <-chan struct{}
	err     func() error // the exit error, valid once done is closed
}

// joinCgroupArgv is argv run by a shell that first moves itself into the
// cgroup2 directory cgroup, so that argv and everything it forks (shims and
// containers, which outlive a killed containerd) are found there.
func joinCgroupArgv(cgroup string, argv ...string) []string {
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cgroup, "cgroup.procs")}, argv...)
}

// nodeArgv is argv run in the namespaces (mount, UTS, network) of the process
// holder, with dir as its working directory.
func nodeArgv(holder int, dir string, argv ...string) []string {
	return append([]string{"nsenter", "--target", strconv.Itoa(holder), "--mount", "--uts", "--net", "--wd=" + dir, "--"}, argv...)
}

// startDaemon starts argv (with env added to the caller's environment) with
// its stdout and stderr appended to logPath. Detached, it runs in its own
// session and outlives the caller; otherwise it is the caller's child that
// dies with it (internal/process).
func startDaemon(name, logPath string, detach bool, env []string, argv []string) (*daemon, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "=== %s %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	d := &daemon{name: name, logPath: logPath}
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("%s: start: %w", name, err)
		}
		done := make(chan struct{})
		var werr error
		go func() { werr = cmd.Wait(); close(done) }()
		d.done, d.err = done, func() error { <-done; return werr }
	} else {
		p, err := process.Start(cmd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		d.done, d.err = p.Done(), p.Err
	}
	d.pid = cmd.Process.Pid
	return d, nil
}

// adopted is a daemon another process started, known by its pid, or (pid 0)
// only by its log.
func adopted(name, logPath string, pid int) *daemon {
	return &daemon{name: name, logPath: logPath, pid: pid}
}

// exited returns an error saying how the daemon ended, or nil while it runs
// (for an adopted daemon, one that never started: nil).
func (d *daemon) exited() error {
	if d.done == nil {
		if d.pid != 0 && !alive(d.pid) {
			return fmt.Errorf("%s (pid %d) exited", d.name, d.pid)
		}
		return nil
	}
	select {
	case <-d.done:
		err := d.err()
		if err == nil {
			err = errors.New("exited with status 0")
		}
		return fmt.Errorf("%s (pid %d) %w", d.name, d.pid, err)
	default:
		return nil
	}
}

// logTail is the last n lines of the daemon's log.
func (d *daemon) logTail(n int) string {
	return fmt.Sprintf("--- %s (%s), last %d lines:\n%s", d.name, d.logPath, n, process.LogTail(d.logPath, n))
}

// pollEvery is how often waitUntil checks.
const pollEvery = 200 * time.Millisecond

// waitUntil calls check until it succeeds, the daemon d (if any) exits, ctx
// ends or timeout passes; the error names what was awaited, the last check
// error and, when d is set, the tail of its log.
func waitUntil(ctx context.Context, timeout time.Duration, what string, d *daemon, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if d != nil {
			if err := d.exited(); err != nil {
				return fmt.Errorf("%s: %w\n%s", what, err, d.logTail(logLines))
			}
		}
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("%s: not within %v: %w", what, timeout, last)
			if d != nil {
				err = fmt.Errorf("%w\n%s", err, d.logTail(logLines))
			}
			return err
		case <-time.After(pollEvery):
		}
	}
}

// logLines is how many lines of a log an error carries.
const logLines = 30

package kubecluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/process"
)

// Stop grace periods: how long a component may take to exit after SIGTERM before
// it gets SIGKILL, and how long to wait after SIGKILL.
const (
	stopGrace = 15 * time.Second
	killWait  = 5 * time.Second
	// pollEvery is how often the exit of a process that is not our child is checked.
	pollEvery = 50 * time.Millisecond
)

// proc is one component process: our child (done is closed once it is reaped), or
// adopted from Dir/pids (done is nil; its liveness is read from /proc).
//
// Every component is the leader of its process group (Setpgid, or Setsid when
// detached), so signals go to the group and reach anything it forked.
type proc struct {
	name    string
	logPath string
	logFrom int64 // size of the log before this process wrote to it
	pid     int
	start   uint64 // /proc/PID/stat starttime: tells this process from a later one with its pid
	done    <-chan struct{}
	exitErr func() error // Wait's error, valid once done is closed
}

// spawn starts argv with Command, its stdout and stderr appended to logPath. It
// runs detached (own session, no parent-death signal) or as our child that dies
// with us (internal/process).
func spawn(o *Options, name, logPath string, argv []string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	fi, err := logf.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	fmt.Fprintf(logf, "=== %s\n", strings.Join(argv, " "))
	cmd := o.Command(argv[0], argv[1:]...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	p := &proc{name: name, logPath: logPath, logFrom: fi.Size()}
	if o.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
		}
		done := make(chan struct{})
		var werr error
		go func() { werr = cmd.Wait(); close(done) }()
		p.done, p.exitErr = done, func() error { <-done; return werr }
	} else {
		child, err := process.Start(cmd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		p.done, p.exitErr = child.Done(), child.Err
	}
	p.pid = cmd.Process.Pid
	p.start, _ = procStart(p.pid) // 0 if it is already gone: then never matched
	return p, nil
}

// adopt returns the process e names if it is still running and belongs to dir
// (same start time, and a command line that names a path under dir), else nil.
func adopt(e pidEntry, dir string) *proc {
	if !e.running(dir) {
		return nil
	}
	return &proc{name: e.name, logPath: logPath(dir, e.name), pid: e.pid, start: e.start}
}

// exited reports whether the process has exited, with its exit error (an exit
// with status 0 is an error too: a component runs until stopped).
func (p *proc) exited() (bool, error) {
	if p.done == nil {
		if st, ok := procStart(p.pid); ok && st == p.start {
			return false, nil
		}
		return true, errors.New("exited")
	}
	select {
	case <-p.done:
		if err := p.exitErr(); err != nil {
			return true, err
		}
		return true, errors.New("exited with status 0")
	default:
		return false, nil
	}
}

// signal sends sig to the process's group (to the process alone if it has no
// group of its own). A process that has exited is not signalled: its pid may be
// someone else's by now.
func (p *proc) signal(sig syscall.Signal) {
	if done, _ := p.exited(); done {
		return
	}
	if err := syscall.Kill(-p.pid, sig); err != nil {
		_ = syscall.Kill(p.pid, sig)
	}
}

// waitExit waits up to d for the process to exit and reports whether it did.
func (p *proc) waitExit(d time.Duration) bool {
	if p.done != nil {
		select {
		case <-p.done:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for {
		if done, _ := p.exited(); done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits (bounded) for the
// process to exit. It is idempotent.
func (p *proc) stop(grace time.Duration) error {
	p.signal(syscall.SIGTERM)
	if p.waitExit(grace) {
		return nil
	}
	return p.kill()
}

// kill sends SIGKILL and waits (bounded) for the process to exit. It is idempotent.
func (p *proc) kill() error {
	p.signal(syscall.SIGKILL)
	if !p.waitExit(killWait) {
		return fmt.Errorf("%s (pid %d): still running %v after SIGKILL", p.name, p.pid, killWait)
	}
	return nil
}

// logSinceStart returns what the process has written to its log so far (up to
// the last 64 KiB of it).
func (p *proc) logSinceStart() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(b)) < p.logFrom {
		return ""
	}
	b = b[p.logFrom:]
	if len(b) > 64<<10 {
		b = b[len(b)-64<<10:]
	}
	return string(b)
}

// portTaken reports whether the process failed because a port was taken (by
// another process between picking it and binding it, or by the previous instance
// still releasing it).
func (p *proc) portTaken() bool {
	return strings.Contains(p.logSinceStart(), "address already in use")
}

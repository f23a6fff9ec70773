// Package process runs the child processes of svcnet's tests, lab and
// benchmarks (etcd, kube-apiserver, svcnet proxy, kube-proxy) so that none
// outlives its parent and each can be stopped as a group.
package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Process is a started child. It is safe for concurrent use.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's error, valid once done is closed
}

// Start starts cmd in its own process group (so signals reach anything it
// forks) with SIGKILL as its parent-death signal (so a crashed parent leaves
// nothing running).
//
// Linux sends the parent-death signal when the *thread* that forked the child
// exits, and Go retires threads (internal/netns does, by design). So the
// child is forked from a goroutine locked to its thread until the child has
// exited: no other goroutine can run on, and retire, that thread meanwhile.
// cmd's SysProcAttr is replaced.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is retired with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return p, nil
}

// Pid returns the child's process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the child has exited, and how: a nil Wait error
// (exit status 0) is reported as an error too, since every child here is
// meant to run until stopped.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.err
	default:
		return false, nil
	}
}

// Err returns Wait's error (nil for exit status 0); call it after Done.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Signal sends sig to the child's process group.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.Pid(), sig)
}

// Stop sends SIGTERM to the group, SIGKILL if it has not exited after grace,
// and waits up to killWait more for it to be reaped. It is idempotent.
func (p *Process) Stop(grace, killWait time.Duration) error {
	if done, _ := p.Exited(); done {
		return nil
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	return p.Kill(killWait)
}

// Kill sends SIGKILL to the group and waits up to wait for the child to be
// reaped. It is idempotent.
func (p *Process) Kill(wait time.Duration) error {
	if done, _ := p.Exited(); done {
		return nil
	}
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("pid %d: still running %v after SIGKILL", p.Pid(), wait)
	}
}

// CheckExecutable returns nil when path names an executable file, else an
// error saying why not: what to check of a child's binary before starting it.
func CheckExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("binary: %w", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("binary %s: not an executable file", path)
	}
	return nil
}

// LogTail returns the last n lines of the log file at path, for error
// messages about a child; when the file cannot be read, the error's text.
func LogTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return LastLines(string(b), n)
}

// LastLines returns the last n lines of s (a child's output), without the
// final newline: all of s when it has n lines or fewer.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// stopTimeout bounds how long a process may take to exit after SIGTERM before it
// gets SIGKILL; killTimeout bounds the wait after SIGKILL.
const (
	stopTimeout = 15 * time.Second
	killTimeout = 5 * time.Second
)

// process is one child started in its own process group, its output appended to a
// log file. done is closed once the process has exited and been reaped; err is the
// exit error, valid after done.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// startProcess starts bin with args, stdout and stderr appended to logPath. The child
// gets its own process group (so stop reaches anything it forks) and SIGKILL when the
// test binary dies (Pdeathsig), so a crashed test leaves nothing running.
//
// Linux sends Pdeathsig when the *thread* that forked the child exits, and Go
// retires threads (netns.NS.Do does, by design). So the child is forked from a
// goroutine locked to its thread until the child has exited: no other goroutine
// can run on, and retire, that thread meanwhile.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	fmt.Fprintf(logf, "=== %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is retired with this goroutine
		if err := cmd.Start(); err != nil {
			logf.Close()
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	return p, nil
}

// exited reports whether the process has exited, with its exit error.
func (p *process) exited() (bool, error) {
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

// stop sends SIGTERM to the process group, then SIGKILL after stopTimeout, and waits
// (bounded) for the process to be reaped. It is idempotent.
func (p *process) stop() error {
	if done, _ := p.exited(); done {
		return nil
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("%s (pid %d): still running %v after SIGKILL", p.name, pgid, killTimeout)
	}
}

// kill sends SIGKILL to the process group and waits (bounded) for it to be reaped.
func (p *process) kill() error {
	if done, _ := p.exited(); done {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("%s (pid %d): still running %v after SIGKILL", p.name, p.cmd.Process.Pid, killTimeout)
	}
}

// logContains reports whether the process's log contains s.
func (p *process) logContains(s string) bool {
	b, err := os.ReadFile(p.logPath)
	return err == nil && bytes.Contains(b, []byte(s))
}

// tail returns the last n lines of the process's log, each line cut to 400 bytes.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another
// process may take it before the caller binds it; callers retry on "address already
// in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portInUse reports whether a failed start was caused by a port taken between
// freePort and bind, so that a retry on new ports may succeed.
func portInUse(p *process) bool { return p.logContains("address already in use") }

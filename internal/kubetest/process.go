package kubetest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	proc "github.com/svcnet/svcnet/internal/process"
)

// stopTimeout bounds how long a process may take to exit after SIGTERM before it
// gets SIGKILL; killTimeout bounds the wait after SIGKILL.
const (
	stopTimeout = 15 * time.Second
	killTimeout = 5 * time.Second
)

// process is one child (see internal/process: own process group, killed with
// the test binary), its output appended to a log file.
type process struct {
	name    string
	logPath string
	*proc.Process
}

// startProcess starts bin with args, stdout and stderr appended to logPath.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	fmt.Fprintf(logf, "=== %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	pr, err := proc.Start(cmd)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { <-pr.Done(); logf.Close() }()
	return &process{name: name, logPath: logPath, Process: pr}, nil
}

// exited reports whether the process has exited, with its exit error.
func (p *process) exited() (bool, error) { return p.Exited() }

// stop sends SIGTERM to the process group, then SIGKILL after stopTimeout, and
// waits (bounded) for the process to be reaped. It is idempotent.
func (p *process) stop() error {
	if err := p.Stop(stopTimeout, killTimeout); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// kill sends SIGKILL to the process group and waits (bounded) for it to be reaped.
func (p *process) kill() error {
	if err := p.Kill(killTimeout); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
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

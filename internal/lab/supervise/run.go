package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// EventKind says what happened to the child.
type EventKind int

// Event kinds, in the order they happen to one child.
const (
	// Started: a child runs (Event.PID).
	Started EventKind = iota
	// Exited: the child ended, or could not be started (Event.Exit).
	Exited
	// BackingOff: the next start waits until Event.Until (Event.Backoff is the
	// back-off in force), as a container in CrashLoopBackOff does.
	BackingOff
)

// Event is one change of the child, reported by Run.
type Event struct {
	Kind    EventKind
	At      time.Time
	PID     int           // Started
	Exit    *Exit         // Exited
	Until   time.Time     // BackingOff
	Backoff time.Duration // BackingOff
}

// Exit describes how a child ended, as a container runtime reports a
// terminated container.
type Exit struct {
	// Code is the exit status; for a child killed by a signal it is 128 plus
	// the signal's number, as a shell and container runtimes report it.
	Code int32
	// Signal is the signal that killed the child, or 0.
	Signal syscall.Signal
	// StartErr is set when the child could not be started at all (Code is
	// then 128, containerd's StartError).
	StartErr   error
	StartedAt  time.Time
	FinishedAt time.Time
}

// Reason is the kubelet's reason for a terminated container: Completed for
// exit status 0, StartError when it never ran, else Error.
func (e *Exit) Reason() string {
	switch {
	case e.StartErr != nil:
		return "StartError"
	case e.Code == 0:
		return "Completed"
	}
	return "Error"
}

// String says how the child ended, for logs.
func (e *Exit) String() string {
	switch {
	case e.StartErr != nil:
		return "could not start: " + e.StartErr.Error()
	case e.Signal != 0:
		return fmt.Sprintf("killed by signal %d (%s)", int(e.Signal), e.Signal)
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Config configures Run.
type Config struct {
	// Argv is the child's command line (Argv[0] is looked up in $PATH).
	Argv []string
	// Stdout and Stderr receive the child's output (nil: discarded).
	Stdout, Stderr io.Writer
	// Backoff decides the waits between restarts; nil: NewBackoff with the
	// defaults on the real clock.
	Backoff *Backoff
	// StopGrace is how long a stopped child has between SIGTERM and SIGKILL
	// (default 3 s).
	StopGrace time.Duration
	// Events, when set, is called with every event, from Run's goroutine, in
	// order; it must not block for long.
	Events func(Event)
	// Log receives one line per start, exit and back-off.
	Log klog.Logger
}

const defaultStopGrace = 3 * time.Second

// Run starts the child and starts it again whenever it exits, waiting as
// Backoff says, until ctx ends; then it stops the child (see the package doc)
// and returns nil. It returns an error only for an empty Argv.
func Run(ctx context.Context, cfg Config) error {
	if len(cfg.Argv) == 0 {
		return errors.New("supervise: no command")
	}
	if cfg.Backoff == nil {
		cfg.Backoff = NewBackoff(DefaultInitialBackoff, DefaultMaxBackoff, nil)
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = defaultStopGrace
	}
	emit := func(e Event) {
		if cfg.Events != nil {
			cfg.Events(e)
		}
	}
	for restarts := 0; ; restarts++ {
		exit, stopped := runOnce(ctx, cfg, emit)
		if stopped {
			return nil
		}
		cfg.Log.Info("child ended", "argv0", cfg.Argv[0], "how", exit.String(), "ran", exit.FinishedAt.Sub(exit.StartedAt).Round(time.Millisecond), "restarts", restarts)
		emit(Event{Kind: Exited, At: exit.FinishedAt, Exit: exit})
		if ctx.Err() != nil {
			return nil
		}
		if d := cfg.Backoff.Delay(exit.FinishedAt); d > 0 {
			until := time.Now().Add(d)
			cfg.Log.Info("back-off restarting child", "backoff", cfg.Backoff.Current(), "restartIn", d.Round(time.Millisecond))
			emit(Event{Kind: BackingOff, At: time.Now(), Until: until, Backoff: cfg.Backoff.Current()})
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		cfg.Backoff.Restarting(exit.FinishedAt)
	}
}

// runOnce starts the child and waits for it to exit, or for ctx to end (then
// it stops the child and reports stopped).
func runOnce(ctx context.Context, cfg Config, emit func(Event)) (exit *Exit, stopped bool) {
	if ctx.Err() != nil {
		return nil, true
	}
	cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = cfg.Stdout, cfg.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return &Exit{Code: 128, StartErr: err, StartedAt: start, FinishedAt: time.Now()}, false
	}
	pid := cmd.Process.Pid
	cfg.Log.Info("child started", "argv0", cfg.Argv[0], "pid", pid)
	emit(Event{Kind: Started, At: start, PID: pid})
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return exitOf(cmd.ProcessState, start), false
	case <-ctx.Done():
		stop(cmd.Process, done, cfg.StopGrace)
		cfg.Log.Info("child stopped", "pid", pid)
		return nil, true
	}
}

// stop sends SIGTERM to p, and SIGKILL when it has not exited (done) within
// grace, and returns once it has exited.
func stop(p *os.Process, done <-chan error, grace time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	_ = p.Kill()
	<-done
}

// exitOf describes a finished child.
func exitOf(st *os.ProcessState, start time.Time) *Exit {
	e := &Exit{StartedAt: start, FinishedAt: time.Now(), Code: int32(st.ExitCode())}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal()
		e.Code = 128 + int32(e.Signal)
	}
	return e
}

package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// startErrorLines is how many log lines a StartError carries.
const startErrorLines = 40

// StartError is a component that did not start or become ready.
type StartError struct {
	// Component is "etcd", "kube-apiserver", "kube-controller-manager",
	// "kube-scheduler" (or
	// "cluster" for a failure before any process started).
	Component string
	Err       error
	// Log is the tail of what the failed process wrote to its log.
	Log string
}

func (e *StartError) Error() string {
	if e.Log == "" {
		return fmt.Sprintf("kubecluster: start %s: %v", e.Component, e.Err)
	}
	return fmt.Sprintf("kubecluster: start %s: %v\n--- last lines of %s.log:\n%s", e.Component, e.Err, e.Component, e.Log)
}

func (e *StartError) Unwrap() error { return e.Err }

// Stop stops every component, the controller manager first and etcd last, each
// with SIGTERM and then SIGKILL after a grace period, bounded; it removes
// Dir/pids when all have exited. It is idempotent.
func (c *Cluster) Stop() error {
	return c.stopAll(func(p *proc) error { return p.stop(stopGrace) })
}

// Kill kills every component with SIGKILL (for a cluster whose state is thrown
// away), bounded, and removes Dir/pids when all have exited. It is idempotent.
func (c *Cluster) Kill() error {
	return c.stopAll((*proc).kill)
}

func (c *Cluster) stopAll(stop func(*proc) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := len(c.comps) - 1; i >= 0; i-- {
		if p := c.comps[i].proc; p != nil {
			if err := stop(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := c.writePidsLocked(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubecluster: stop %s: %w", c.o.Dir, errors.Join(errs...))
	}
	return nil
}

// StopAPIServer stops kube-apiserver gracefully (SIGTERM; SIGKILL after 15s),
// leaving etcd and the controller manager running.
func (c *Cluster) StopAPIServer() error {
	return c.stopOne(apiName, func(p *proc) error { return p.stop(stopGrace) })
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would.
func (c *Cluster) KillAPIServer() error { return c.stopOne(apiName, (*proc).kill) }

func (c *Cluster) stopOne(name string, stop func(*proc) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	comp := c.get(name)
	if comp == nil || comp.proc == nil {
		return fmt.Errorf("kubecluster: %s was not started", name)
	}
	err := stop(comp.proc)
	if perr := c.writePidsLocked(); err == nil {
		err = perr
	}
	return err
}

// StartAPIServer starts kube-apiserver again with the command line, port, etcd,
// certificates and token it had, and waits until it is ready; Config, Client and
// the kubeconfigs stay valid. While the old instance's socket is being released
// it retries (bounded). It fails if the apiserver is running.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	old := c.get(apiName)
	c.mu.Unlock()
	if old == nil {
		return fmt.Errorf("kubecluster: %s was not started", apiName)
	}
	if done, _ := old.proc.exited(); !done {
		return fmt.Errorf("kubecluster: %s is still running (pid %d)", apiName, old.proc.pid)
	}
	_, err := c.launch(ctx, true, 5, time.Second, func() (*component, error) {
		return &component{name: apiName, argv: old.argv}, nil
	})
	return err
}

// Logs returns the tail (n lines) of each component's log, for failure messages.
func (c *Cluster) Logs(n int) string { return Logs(c.o.Dir, n) }

// Logs returns the tail (n lines) of the log of each component that has one in
// dir, in start order: "--- NAME (PATH), last N lines:" and the lines.
func Logs(dir string, n int) string {
	var b strings.Builder
	for _, name := range componentOrder {
		path := logPath(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "--- %s (%s), last %d lines:\n%s\n", name, path, n, lastLines(string(data), n))
	}
	return b.String()
}

// Package netns is the one place in svcnet that enters Linux network namespaces.
//
// Contract: a namespace is entered only on a locked OS thread in a fresh
// goroutine (Do). That goroutine exits while still locked, so the Go runtime
// retires its thread and no thread is ever left in the wrong namespace, even
// when fn panics or restoring the original namespace would fail.
package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// RunDir is where named namespaces are bind-mounted, as iproute2 does, so that
// `ip netns exec NAME` sees the namespaces svcnet creates.
const RunDir = "/run/netns"

// NS is a network namespace held open by a file descriptor. A named NS is also
// bind-mounted at RunDir/NAME.
type NS struct {
	name string
	f    *os.File
}

// Name returns the namespace's name ("" for an unnamed one).
func (n *NS) Name() string { return n.name }

// Path returns a path that opens the namespace (its bind mount, or /proc/self/fd/N).
func (n *NS) Path() string {
	if n.name != "" {
		return filepath.Join(RunDir, n.name)
	}
	return fmt.Sprintf("/proc/self/fd/%d", n.f.Fd())
}

// Fd returns the namespace's file descriptor, valid until Close or Delete.
func (n *NS) Fd() int { return int(n.f.Fd()) }

// Create makes a new named network namespace with `ip netns add NAME` (iproute2
// owns the /run/netns mount-propagation dance; doing it again here would only
// copy it). It fails if the name is taken. The calling thread never moves.
func Create(name string) (*NS, error) {
	if name == "" || strings.ContainsAny(name, "/\x00 ") || name == "." || name == ".." {
		return nil, fmt.Errorf("create netns %q: invalid name", name)
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("create netns %q: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	ns, err := Open(name)
	if err != nil {
		_ = DeleteNamed(name)
		return nil, err
	}
	// The loopback interface of a new namespace is down; every user wants it up.
	if err := ns.Do(loopbackUp); err != nil {
		_ = ns.Delete()
		return nil, fmt.Errorf("create netns %q: %w", name, err)
	}
	return ns, nil
}

// Open opens the existing named namespace NAME.
func Open(name string) (*NS, error) {
	f, err := os.Open(filepath.Join(RunDir, name))
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", name, err)
	}
	return &NS{name: name, f: f}, nil
}

// OpenPath opens the namespace at path (e.g. /proc/PID/ns/net or a CNI_NETNS).
func OpenPath(path string) (*NS, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", path, err)
	}
	return &NS{f: f}, nil
}

// Exists reports whether a namespace named NAME is mounted.
func Exists(name string) bool {
	_, err := os.Stat(filepath.Join(RunDir, name))
	return err == nil
}

// Close releases the descriptor; the namespace lives on while it is mounted or used.
func (n *NS) Close() error { return n.f.Close() }

// Delete closes the namespace and removes its mount, as `ip netns del` does.
// Deleting a namespace that is already gone is not an error.
func (n *NS) Delete() error {
	n.f.Close()
	if n.name == "" {
		return nil
	}
	return DeleteNamed(n.name)
}

// DeleteNamed removes the named namespace (`ip netns del`, falling back to a
// lazy unmount when iproute2 fails); a missing one is not an error.
func DeleteNamed(name string) error {
	if !Exists(name) {
		return nil
	}
	out, err := exec.Command("ip", "netns", "del", name).CombinedOutput()
	if err == nil || !Exists(name) {
		return nil
	}
	if uerr := unmountAndRemove(filepath.Join(RunDir, name)); uerr != nil {
		return fmt.Errorf("delete netns %q: %w: %s; %w", name, err, strings.TrimSpace(string(out)), uerr)
	}
	return nil
}

// Do runs fn inside the namespace, on a locked OS thread of a fresh goroutine,
// and returns its error. The thread is retired afterwards (see package doc).
func (n *NS) Do(fn func() error) error {
	fd := int(n.f.Fd())
	return onFreshThread(func() error {
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter netns %s: %w", n.Path(), err)
		}
		return fn()
	})
}

// Command returns a command that runs argv inside the named namespace through
// `ip netns exec`, which also bind-mounts /etc/netns/NAME files as iproute2 does.
func (n *NS) Command(argv ...string) *exec.Cmd {
	return CommandIn(context.Background(), n.name, argv...)
}

// CommandContext is Command, killed when ctx ends (exec.CommandContext).
func (n *NS) CommandContext(ctx context.Context, argv ...string) *exec.Cmd {
	return CommandIn(ctx, n.name, argv...)
}

// CommandIn returns a command, killed when ctx ends, that runs argv inside the
// namespace named name (under RunDir) through `ip netns exec`, for callers that
// hold the name rather than an open NS.
func CommandIn(ctx context.Context, name string, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", name}, argv...)...)
}

// onFreshThread runs fn in a new goroutine locked to its thread and never
// unlocks it, so the runtime discards the thread when the goroutine ends.
func onFreshThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer func() {
			if r := recover(); r != nil {
				errc <- fmt.Errorf("panic in netns: %v", r)
			}
		}()
		errc <- fn()
	}()
	return <-errc
}

func unmountAndRemove(target string) error {
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// DoNamed runs fn in the named namespace as Do does, opening and closing it.
func DoNamed(name string, fn func() error) error {
	ns, err := Open(name)
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

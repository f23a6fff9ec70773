package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// ControlPlane kinds.
const (
	ControlPlaneFile = "file" // the embedded control plane over manifests
	ControlPlaneKube = "kube" // real kube-apiserver + kube-controller-manager
)

// Info is what a lab remembers about itself (lab.json).
type Info struct {
	Name         string `json:"name"`
	Nodes        int    `json:"nodes"`
	ControlPlane string `json:"controlPlane"`
	// Binary is the svcnet binary every lab process runs.
	Binary string `json:"binary"`
	// ProxyArgs are the extra flags of every node's svcnet proxy (lab.Options.ProxyArgs).
	ProxyArgs []string `json:"proxyArgs,omitempty"`
	// Proxy is the nodes' Service proxy (lab.Options.Proxy; "" is ProxySvcnet, as
	// in labs made before it existed).
	Proxy string `json:"proxy,omitempty"`
	// DataPlane is every node's svcnet proxy's --data-plane when set
	// (lab.Options.DataPlane; "" is the proxy's default).
	DataPlane string `json:"dataPlane,omitempty"`
	// IPFamily is the lab's IP families, as `lab up --ip-family` names them
	// (topology.Stack; "" is ipv4, as in labs made before it existed).
	IPFamily string `json:"ipFamily,omitempty"`
	// K8sBin is the directory of the Kubernetes binaries (kube control plane).
	K8sBin string `json:"k8sBin,omitempty"`
	// NextNode is the round-robin cursor for Pods that name no node (0-based).
	NextNode int `json:"nextNode"`
}

// Stack is the lab's IP families; an unknown spelling is IPv4, as ReadInfo
// refuses it.
func (in *Info) Stack() topology.Stack {
	s, err := topology.ParseStack(in.IPFamily)
	if err != nil {
		return nil
	}
	return s
}

func infoPath(n topology.Names) string { return n.Path("lab.json") }

// ErrNoLab is returned by commands on a lab that is not up.
var ErrNoLab = errors.New("lab is not up")

func ReadInfo(n topology.Names) (*Info, error) {
	b, err := os.ReadFile(infoPath(n))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("lab %s: %w (run `svcnet lab up --name %s`)", n.Lab, ErrNoLab, n.Lab)
	}
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	var in Info
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("lab %s: %s: %w", n.Lab, infoPath(n), err)
	}
	if _, err := topology.ParseStack(in.IPFamily); err != nil {
		return nil, fmt.Errorf("lab %s: %s: %w", n.Lab, infoPath(n), err)
	}
	return &in, nil
}

func WriteInfo(n topology.Names, in *Info) error {
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(infoPath(n), append(b, '\n'))
}

// writeFileAtomic writes a lab file (see package atomicfile).
func writeFileAtomic(path string, b []byte) error { return atomicfile.Write(path, b, 0o644) }

// Lock takes the lab's exclusive lock (a file beside the state directory, so that
// Down can remove the directory while holding it). The returned func releases it.
func Lock(n topology.Names) (func(), error) {
	return lockWith(n, func(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX) })
}

// TryLock is Lock, giving up after wait (ErrBusy) while another command
// holds the lock: for readers that must not hang, shell completion.
func TryLock(n topology.Names, wait time.Duration) (func(), error) {
	deadline := time.Now().Add(wait)
	return lockWith(n, func(f *os.File) error {
		for {
			err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				return nil
			}
			if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
				if errors.Is(err, unix.EWOULDBLOCK) {
					err = ErrBusy
				}
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// lockTries bounds lockWith's attempts: each one after the first follows a
// Down that removed the lock file between its open and its lock.
const lockTries = 100

// lockWith opens the lab's lock file and takes its lock with take. The lock
// is held only while the file locked is the one at the path: Down removes
// the file while holding it (RemoveLock), so a command that waited on the
// removed file opens the path again.
func lockWith(n topology.Names, take func(*os.File) error) (func(), error) {
	for range lockTries {
		f, err := openLock(n)
		if err != nil {
			return nil, err
		}
		if err := take(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("lab %s: lock: %w", n.Lab, err)
		}
		if current, err := sameFile(f, lockPath(n)); err != nil || !current {
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("lab %s: lock: %w", n.Lab, err)
			}
			continue
		}
		return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
	}
	return nil, fmt.Errorf("lab %s: lock: its file was removed under each of %d attempts", n.Lab, lockTries)
}

// sameFile reports whether f is the file at path now (false when none is).
func sameFile(f *os.File, path string) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	now, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(held, now), nil
}

// RemoveLock removes the lab's lock file; the caller holds the lock and
// releases it next, having done everything else (Down). A command waiting
// for the lock then takes it on a new file (lockWith).
func RemoveLock(n topology.Names) error {
	if err := os.Remove(lockPath(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lab %s: lock: %w", n.Lab, err)
	}
	return nil
}

// ErrBusy is TryLock's answer while another command holds the lab's lock.
var ErrBusy = errors.New("another lab command holds the lab's lock")

// lockPath is the file of the lab's lock.
func lockPath(n topology.Names) string { return filepath.Join(topology.RunRoot, n.Lab+".lock") }

// openLock opens the file of the lab's lock, creating it.
func openLock(n topology.Names) (*os.File, error) {
	if err := os.MkdirAll(topology.RunRoot, 0o755); err != nil {
		return nil, fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	f, err := os.OpenFile(lockPath(n), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lab %s: lock: %w", n.Lab, err)
	}
	return f, nil
}

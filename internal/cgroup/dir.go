package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Child returns root/name for a name that is one path element (no '/', not
// "." or "..", not empty) and not a file of the cgroup interface (no name
// with a '.': the kernel's files all have one, "cgroup.procs",
// "memory.max"), so a directory made from it is never the root nor a file of
// the root.
func Child(root, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/.\x00") {
		return "", fmt.Errorf("cgroup: %q is no name for a child cgroup (one path element without '.')", name)
	}
	return filepath.Join(root, name), nil
}

// Make creates dir (one level; its parent must exist), and succeeds when it
// exists already.
func Make(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// Open returns a descriptor of the cgroup directory dir for
// SysProcAttr.CgroupFD (clone3 CLONE_INTO_CGROUP), close-on-exec.
func Open(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup: open %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// Pids returns the processes in the cgroup dir itself (cgroup.procs), not
// those of its children.
func Pids(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return parsePids(string(b))
}

func parsePids(s string) ([]int, error) {
	var pids []int
	for _, f := range strings.Fields(s) {
		p, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroup: cgroup.procs: %q is no pid", f)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// Remove removes the cgroup directory dir (which must have no child
// directory), waiting up to wait for the processes in it to exit; it signals
// none. A dir that does not exist is removed already. When processes are
// left, the error names dir and their pids.
func Remove(dir string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("cgroup: remove %s: %w", dir, err)
		}
		if time.Now().After(deadline) {
			pids, perr := Pids(dir)
			if perr != nil {
				return fmt.Errorf("cgroup: remove %s: %w (%v)", dir, err, perr)
			}
			return fmt.Errorf("cgroup: remove %s: processes %v still in it after %v: %w", dir, pids, wait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

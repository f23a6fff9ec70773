package nodecluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/cgroup"
	"golang.org/x/sys/unix"
)

// Every process of a cluster lives in one cgroup subtree, svcnet.NAME, of the
// cgroup2 hierarchy: the control plane in svcnet.NAME/control-plane, a node's
// daemons in svcnet.NAME/nodeN/system, and its Pods where its kubelet (whose
// cgroupRoot is /svcnet.NAME/nodeN) and runc put them, under
// svcnet.NAME/nodeN/kubepods. So Down finds and kills them all, containers and
// their shims included, whatever killed the processes that started them
// (cgroup.kill). On a hybrid host the kubelet and runc also make
// svcnet.NAME/nodeN/... in every cgroup v1 hierarchy; Down removes those too.
//
// Each kubelet has a cgroupRoot of its own because a kubelet treats every Pod
// cgroup under its kubepods that it does not know as an orphan, and kills it:
// three kubelets sharing /kubepods would kill each other's Pods.

// cgroupMounts returns the cgroup hierarchies and the cgroup2 one
// (cgroup.Mounts).
func cgroupMounts() (all []string, v2 string, err error) { return cgroup.Mounts() }

// makeCgroup makes the cgroup rel (a relative path such as svcnet.x/node1) in
// every hierarchy. A new cpuset cgroup gets its parent's cpus and mems, or no
// task could join it.
func makeCgroup(hierarchies []string, rel string) error {
	for _, h := range hierarchies {
		parts := strings.Split(rel, "/")
		for i := range parts {
			dir := filepath.Join(h, filepath.Join(parts[:i+1]...))
			if err := os.Mkdir(dir, 0o755); err != nil {
				if errors.Is(err, fs.ErrExist) {
					continue
				}
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
			if err := inheritCpuset(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// inheritCpuset copies cpuset.cpus and cpuset.mems from the parent of a new
// cgroup v1 cpuset directory; it does nothing elsewhere.
func inheritCpuset(dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		own := filepath.Join(dir, f)
		if _, err := os.Stat(own); err != nil {
			return nil // not a v1 cpuset hierarchy
		}
		cur, err := os.ReadFile(own)
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", own, err)
		}
		if len(bytes.TrimSpace(cur)) > 0 {
			continue
		}
		v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if err := os.WriteFile(own, v, 0o644); err != nil {
			return fmt.Errorf("cgroup %s: %w", own, err)
		}
	}
	return nil
}

// cgroupProcs returns the processes in the cgroup2 directory dir and below.
func cgroupProcs(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	return pids, nil
}

// killCgroup kills every process in the cgroup2 directory dir and below
// (cgroup.kill, or SIGKILL to each process where the kernel has no
// cgroup.kill) and waits up to wait until none is left. A missing dir is
// already empty.
func killCgroup(dir string, wait time.Duration) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		pids, err := cgroupProcs(dir)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes %v still running %v after SIGKILL", dir, pids, wait)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644); err != nil {
			for _, p := range pids {
				_ = unix.Kill(p, unix.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroup removes the cgroup rel, children first, from every hierarchy.
// The cgroups must hold no process (killCgroup); a cgroup that is still
// being released (EBUSY) is tried again for up to wait.
func removeCgroup(hierarchies []string, rel string, wait time.Duration) error {
	var errs []error
	for _, h := range hierarchies {
		top := filepath.Join(h, rel)
		var dirs []string
		err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", top, err))
			continue
		}
		// WalkDir visits parents before children: remove in reverse.
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := rmdirRetry(dirs[i], wait); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func rmdirRetry(dir string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: rmdir: %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupDirs returns the directories of cgroup rel that exist, in every
// hierarchy.
func cgroupDirs(hierarchies []string, rel string) []string {
	var out []string
	for _, h := range hierarchies {
		dir := filepath.Join(h, rel)
		if _, err := os.Stat(dir); err == nil {
			out = append(out, dir)
		}
	}
	return out
}

package nodecluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// Bounds of Down's waits.
const (
	killWait   = 15 * time.Second // for the processes of a cgroup or namespace to exit after SIGKILL
	rmdirWait  = 5 * time.Second  // for a cgroup to be released
	downRounds = 3                // kill rounds: a process may fork while its group is being killed
)

// Down stops every process of the cluster name and removes everything it made,
// from the names alone, so that it works whatever killed the processes that
// made them (kill -9 of Up's caller included): every process in the cluster's
// cgroup (svcnet.NAME: the control plane, the nodes' daemons, the shims and
// the containers) and in its namespaces is killed (SIGKILL: the state is
// thrown away), then the network namespaces NAME.* are deleted, the cgroup
// svcnet.NAME is removed from every hierarchy, and dir is removed. A dir that
// exists but is not a cluster's (no nodecluster.json) is refused unless it
// is empty. Down of a cluster that is not there does nothing.
func Down(name, dir string) error {
	if err := topology.ValidateName(name); err != nil {
		return fmt.Errorf("nodecluster down: %w", err)
	}
	l := layout{name: name, dir: filepath.Clean(dir)}
	hier, v2, err := cgroupMounts()
	if err != nil {
		return fmt.Errorf("nodecluster %s: down: %w", name, err)
	}
	var errs []error
	top := filepath.Join(v2, l.cgroupTop())
	for round := 1; ; round++ {
		if err := killCgroup(top, killWait); err != nil {
			errs = append(errs, err)
		}
		left, err := killNamespaces(l.names())
		if err != nil {
			errs = append(errs, err)
		}
		pids, _ := cgroupProcs(top)
		if left == 0 && len(pids) == 0 {
			break
		}
		if round == downRounds {
			errs = append(errs, fmt.Errorf("processes still running after %d rounds of SIGKILL", round))
			break
		}
	}
	if err := deleteNamespaces(l.names()); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroup(hier, l.cgroupTop(), rmdirWait); err != nil {
		errs = append(errs, err)
	}
	if err := removeDir(l.dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("nodecluster %s: down: %w", name, errors.Join(errs...))
	}
	return nil
}

// clusterNamespaces returns the network namespaces of the cluster.
func clusterNamespaces(names topology.Names) ([]string, error) {
	all, err := netns.Names()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(ns string) bool { return !names.Owns(ns) }), nil
}

// killNamespaces sends SIGKILL to every process in the cluster's network
// namespaces and waits (bounded) for them to exit; it returns how many it
// found.
func killNamespaces(names topology.Names) (int, error) {
	nss, err := clusterNamespaces(names)
	if err != nil {
		return 0, err
	}
	var pids []int
	for _, ns := range nss {
		p, err := netns.PidsIn(filepath.Join(netns.RunDir, ns))
		if err != nil {
			continue // deleted meanwhile
		}
		pids = append(pids, p...)
	}
	for _, p := range pids {
		_ = unix.Kill(p, unix.SIGKILL)
	}
	deadline := time.Now().Add(killWait)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				return len(pids), fmt.Errorf("process %d still running %v after SIGKILL", p, killWait)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return len(pids), nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.State != "Z"
}

func deleteNamespaces(names topology.Names) error {
	nss, err := clusterNamespaces(names)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range nss {
		if err := netns.DeleteNamed(ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeDir removes a cluster's directory. Nothing is ever mounted under it in
// the caller's mount namespace (the nodes mount in theirs); should something
// be, it is unmounted first (lazily), so that removing never reaches into a
// mounted file system.
func removeDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, stateFile)); err != nil {
			return fmt.Errorf("dir %s: not a node cluster's (no %s): not removed", dir, stateFile)
		}
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", mounts[i], err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// mountsUnder returns the mount points at or under dir in the caller's mount
// namespace, parents first.
func mountsUnder(dir string) ([]string, error) {
	ms, err := procfs.GetMounts()
	if err != nil {
		return nil, fmt.Errorf("mounts: %w", err)
	}
	var out []string
	for _, m := range ms {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m.MountPoint)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Pids returns the processes of the cluster name: those in its cgroup and in
// its network namespaces.
func Pids(name string) ([]int, error) {
	_, v2, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	l := layout{name: name}
	pids, err := cgroupProcs(filepath.Join(v2, l.cgroupTop()))
	if err != nil {
		return nil, err
	}
	nss, err := clusterNamespaces(l.names())
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		if p, err := netns.PidsIn(filepath.Join(netns.RunDir, ns)); err == nil {
			pids = append(pids, p...)
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// Leftovers lists what of the cluster name (state directory dir) exists: its
// network namespaces, its cgroups in every hierarchy, the processes in them,
// mounts at or under dir in the caller's mount namespace, and dir. After Down
// it is empty.
func Leftovers(name, dir string) ([]string, error) {
	hier, _, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	l := layout{name: name, dir: filepath.Clean(dir)}
	var out []string
	nss, err := clusterNamespaces(l.names())
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		out = append(out, "network namespace "+ns)
	}
	for _, d := range cgroupDirs(hier, l.cgroupTop()) {
		out = append(out, "cgroup "+d)
	}
	pids, err := Pids(name)
	if err != nil {
		return nil, err
	}
	for _, p := range pids {
		out = append(out, fmt.Sprintf("process %d %s", p, comm(p)))
	}
	mounts, err := mountsUnder(l.dir)
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		out = append(out, "mount "+m)
	}
	if _, err := os.Stat(l.dir); err == nil {
		out = append(out, "directory "+l.dir)
	}
	return out, nil
}

// comm is the process's command name, or "?".
func comm(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return "?"
	}
	c, err := p.Comm()
	if err != nil {
		return "?"
	}
	return c
}

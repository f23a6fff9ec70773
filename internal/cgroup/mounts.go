// Package cgroup finds the cgroup hierarchies of the caller's mount
// namespace: where cgroup v2 directories are made and BPF programs attached.
package cgroup

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/procfs"
)

// Mounts returns the mount points of the cgroup hierarchies (v1 and v2) of
// the caller's mount namespace, sorted, and which one is the cgroup2
// hierarchy (/sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a
// hybrid one).
func Mounts() (all []string, v2 string, err error) {
	ms, err := procfs.GetMounts()
	if err != nil {
		return nil, "", fmt.Errorf("cgroup hierarchies: %w", err)
	}
	all, v2 = pick(ms)
	if v2 == "" {
		return nil, "", errors.New("cgroup hierarchies: no cgroup2 hierarchy mounted (on a hybrid host, /sys/fs/cgroup/unified)")
	}
	return all, v2, nil
}

// Root returns the mount point of the cgroup2 hierarchy.
func Root() (string, error) {
	_, v2, err := Mounts()
	return v2, err
}

// pick returns the cgroup mount points of ms, sorted and deduplicated, and
// the first cgroup2 one.
func pick(ms []*procfs.MountInfo) (all []string, v2 string) {
	for _, m := range ms {
		switch m.FSType {
		case "cgroup":
			all = append(all, m.MountPoint)
		case "cgroup2":
			all = append(all, m.MountPoint)
			if v2 == "" {
				v2 = m.MountPoint
			}
		}
	}
	slices.Sort(all)
	return slices.Compact(all), v2
}

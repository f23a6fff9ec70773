package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// ErrNoCgroup2 is Mounts' and Root's error when no cgroup2 hierarchy is
// mounted in the caller's mount namespace.
var ErrNoCgroup2 = errors.New("cgroup hierarchies: no cgroup2 hierarchy mounted (on a hybrid host, /sys/fs/cgroup/unified)")

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
		return nil, "", ErrNoCgroup2
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

// PrivateMount is where Dir mounts the cgroup2 hierarchy when the caller's
// mount namespace has none, as Cilium mounts it at /run/cilium/cgroupv2: a
// process started by `ip netns exec` sees a fresh /sys without the host's
// cgroup mounts, and a container may have no /sys/fs/cgroup.
const PrivateMount = "/run/svcnet/cgroup2"

// Dir returns the directory of the cgroup v2 path p (as /proc/PID/cgroup
// names it: "/" for the root, "/svcnet-lab-x/node1") in the cgroup2
// hierarchy of the caller's mount namespace. When none is mounted there it
// mounts one at PrivateMount first (nothing is mounted when one is found).
func Dir(p string) (string, error) {
	if err := CheckPath(p); err != nil {
		return "", err
	}
	_, root, err := Mounts()
	if err != nil {
		if root, err = mountPrivate(); err != nil {
			return "", err
		}
	}
	return filepath.Join(root, p), nil
}

// CheckPath checks that p is a cgroup v2 path: absolute, clean (no "..",
// no doubled or trailing slash) and of printable characters.
func CheckPath(p string) error {
	if p == "" || p[0] != '/' || path.Clean(p) != p {
		return fmt.Errorf("cgroup path %q: want an absolute, clean path such as /kubepods (as /proc/PID/cgroup names cgroups)", p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("cgroup path %q: control character", p)
		}
	}
	return nil
}

// Path returns the cgroup v2 path of dir, a directory under the cgroup2
// mount root (Root): the inverse of Dir.
func Path(root, dir string) (string, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("cgroup directory %s is not under %s", dir, root)
	}
	if rel == "." {
		return "/", nil
	}
	return "/" + rel, nil
}

// mountPrivate mounts the cgroup2 hierarchy at PrivateMount, or finds it
// there already, and returns PrivateMount.
func mountPrivate() (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(PrivateMount, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return PrivateMount, nil
	}
	if err := os.MkdirAll(PrivateMount, 0o755); err != nil {
		return "", fmt.Errorf("cgroup2: no hierarchy mounted: %w", err)
	}
	if err := unix.Mount("none", PrivateMount, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "", fmt.Errorf("cgroup2: no hierarchy mounted, and mounting one at %s: %w", PrivateMount, err)
	}
	return PrivateMount, nil
}

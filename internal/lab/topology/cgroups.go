package topology

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/svcnet/svcnet/internal/cgroup"
)

// The lab's cgroups: every process the lab runs for node i (its agents, its
// pods' processes and their supervisors, `lab exec` and the dials of lab
// commands from it) starts in ROOT/svcnet-lab-NAME/nodeI, ROOT being the
// cgroup v2 mount (cgroup.Root), so a data plane attached to that cgroup
// sees the node's own sockets. The control plane and the client run in the
// caller's cgroup. Nothing is written to ROOT's own files, and nothing is
// attached there.

// cgroupPrefix starts the name of a lab's cgroup directory.
const cgroupPrefix = "svcnet-lab-"

// NodeCgroupPath is node i's cgroup v2 path, as /proc/PID/cgroup names it:
// /svcnet-lab-NAME/nodeI, relative to the hierarchy's root, so it names the
// same cgroup in any mount namespace (svcnet proxy --cgroup). n.Lab is a
// checked name, as in every Names a lab command builds (ValidateName); the
// proxy checks the path again (cgroup.CheckPath).
func (n Names) NodeCgroupPath(i int) string {
	return "/" + cgroupPrefix + n.Lab + "/" + NodeName(i)
}

// Cgroup is the lab's cgroup directory under root, ROOT/svcnet-lab-NAME.
// The lab's name is checked (ValidateName) before it becomes part of the path.
func (n Names) Cgroup(root string) (string, error) {
	if err := ValidateName(n.Lab); err != nil {
		return "", err
	}
	return cgroup.Child(root, cgroupPrefix+n.Lab)
}

// NodeCgroup is node i's cgroup directory under root, ROOT/svcnet-lab-NAME/nodeI.
func (n Names) NodeCgroup(root string, i int) (string, error) {
	if i < 1 || i > MaxNodes {
		return "", fmt.Errorf("lab %s: no node %d for a cgroup", n.Lab, i)
	}
	lab, err := n.Cgroup(root)
	if err != nil {
		return "", err
	}
	return cgroup.Child(lab, NodeName(i))
}

// NodeCgroupDir is node i's cgroup directory under the cgroup v2 mount.
func (n Names) NodeCgroupDir(i int) (string, error) {
	root, err := cgroup.Root()
	if err != nil {
		return "", fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	return n.NodeCgroup(root, i)
}

// MakeNodeCgroup creates node i's cgroup (and the lab's, when missing) and
// returns its directory.
func MakeNodeCgroup(n Names, i int) (string, error) {
	dir, err := n.NodeCgroupDir(i)
	if err != nil {
		return "", err
	}
	if err := cgroup.Make(filepath.Dir(dir)); err != nil {
		return "", fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	if err := cgroup.Make(dir); err != nil {
		return "", fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	return dir, nil
}

// cgroupRemoveWait bounds the wait for the processes in one cgroup of the
// lab to exit, when the lab is removed after they were stopped.
const cgroupRemoveWait = 5 * time.Second

// RemoveCgroups removes the lab's cgroup directory and every child of it, once
// the processes in each have exited (Remove stops the lab's processes first);
// it kills none. Without a cgroup v2 mount there is nothing to remove.
func RemoveCgroups(n Names) error {
	root, err := cgroup.Root()
	if errors.Is(err, cgroup.ErrNoCgroup2) {
		return nil
	}
	if err != nil {
		return err
	}
	lab, err := n.Cgroup(root)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(lab)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue // the kernel's interface files
		}
		if err := cgroup.Remove(filepath.Join(lab, e.Name()), cgroupRemoveWait); err != nil {
			errs = append(errs, fmt.Errorf("lab %s: %w", n.Lab, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := cgroup.Remove(lab, cgroupRemoveWait); err != nil {
		return fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	return nil
}

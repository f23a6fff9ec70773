package topology

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/netns"
)

// Leftovers reports whether anything of the lab exists.
func Leftovers(n Names) (bool, error) {
	if _, err := os.Stat(n.Dir()); err == nil {
		return true, nil
	}
	if root, err := cgroup.Root(); err == nil {
		if dir, err := n.Cgroup(root); err == nil {
			if _, err := os.Stat(dir); err == nil {
				return true, nil
			}
		}
	}
	names, err := netns.Names()
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(names, n.Owns), nil
}

// Remove removes everything of the lab named by n: every process in its
// namespaces, the namespaces, its cgroups (RemoveCgroups), its /etc/netns
// files and its state directory.
// It is idempotent and needs nothing but the names, so it works after a
// crash. The caller holds the lab's lock.
func Remove(n Names) error {
	var errs []error
	all, err := netns.Names()
	if err != nil {
		return err
	}
	var mine []string
	for _, s := range all {
		if n.Owns(s) {
			mine = append(mine, s)
		}
	}
	// Pods first, so their servers end before the nodes' proxies; the fabric last.
	slices.SortFunc(mine, func(a, b string) int { return downOrder(n, a) - downOrder(n, b) })
	for _, s := range mine {
		if err := StopNamespaceProcesses(s, 5*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range mine {
		if err := netns.DeleteNamed(s); err != nil {
			errs = append(errs, err)
		}
	}
	// After the namespaces: their processes are gone, so are the cgroups'
	// and the pins' users.
	if err := RemoveCgroups(n); err != nil {
		errs = append(errs, err)
	}
	if err := UnmountBPFFS(n); err != nil {
		errs = append(errs, err)
	}
	etc, _ := filepath.Glob(filepath.Join(EtcNetns, n.Lab+".*"))
	for _, d := range etc {
		errs = append(errs, os.RemoveAll(d))
	}
	errs = append(errs, os.RemoveAll(n.Dir()))
	return errors.Join(errs...)
}

func downOrder(n Names, s string) int {
	switch {
	case strings.HasPrefix(s, n.prefix()+"pod."):
		return 0
	case s == n.Fabric():
		return 3
	case s == n.Control():
		return 2
	}
	return 1
}

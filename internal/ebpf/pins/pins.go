// Package pins keeps svcnet's BPF objects in a BPF filesystem across
// restarts of the process that loaded them: maps pinned by name and reused by
// the next load when their layout is the same, and BPF links pinned so that
// the programs stay attached in between and the next process swaps its own
// programs into them.
package pins

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// CheckBPFFS checks that root is, or would be made, on a BPF filesystem:
// its nearest existing ancestor is one.
func CheckBPFFS(root string) error {
	for p := root; ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			if st.Type != unix.BPF_FS_MAGIC {
				return fmt.Errorf("pins: %s is not on a BPF filesystem (mount -t bpf)", root)
			}
			return nil
		}
		if !errors.Is(err, unix.ENOENT) || p == filepath.Dir(p) {
			return fmt.Errorf("pins: %s: %w", root, err)
		}
	}
}

// Load loads spec into to (as ebpf.CollectionSpec.LoadAndAssign), the maps
// named in maps pinned by name in dir: pins of the same layout are reused,
// pins of another layout (a different build) removed and replaced. With dir
// "", nothing is pinned.
func Load(spec *ebpf.CollectionSpec, maps []string, dir string, to any) error {
	if dir == "" {
		return spec.LoadAndAssign(to, nil)
	}
	for _, name := range maps {
		m, ok := spec.Maps[name]
		if !ok {
			return fmt.Errorf("pins: no map %s in the object", name)
		}
		m.Pinning = ebpf.PinByName
	}
	opts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}
	err := spec.LoadAndAssign(to, opts)
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		for _, name := range maps {
			if rerr := os.Remove(filepath.Join(dir, name)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return fmt.Errorf("%w; replacing the pins: %w", err, rerr)
			}
		}
		err = spec.LoadAndAssign(to, opts)
	}
	return err
}

// Link returns the link pinned at path updated to prog (no moment without a
// program), or, when none is pinned there, the link attach makes, pinned at
// path.
func Link(path string, prog *ebpf.Program, attach func() (link.Link, error)) (link.Link, error) {
	if l, err := link.LoadPinnedLink(path, nil); err == nil {
		if err := l.Update(prog); err != nil {
			return nil, errors.Join(fmt.Errorf("update pinned link %s: %w", path, err), l.Close())
		}
		return l, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pinned link %s: %w", path, err)
	}
	l, err := attach()
	if err != nil {
		return nil, err
	}
	if err := l.Pin(path); err != nil {
		return nil, errors.Join(fmt.Errorf("pin link %s: %w", path, err), l.Close())
	}
	return l, nil
}

package topology

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The lab's BPF filesystem: a lab whose proxies run the eBPF plane mounts
// one at DIR/bpf (a mount of its own, so nothing is pinned in the host's
// /sys/fs/bpf), and node i's proxy pins its load balancers in
// DIR/bpf/nodeI, so that a restarted proxy adopts what the one before left
// attached (svcnet proxy --bpf-pin-dir). A proxy under `ip netns exec` sees
// the mount: the mount namespace it gets is a copy of the caller's.

// BPFDir is the lab's BPF filesystem.
func (n Names) BPFDir() string { return n.Path("bpf") }

// NodeBPFDir is node i's pin directory in the lab's BPF filesystem.
func (n Names) NodeBPFDir(i int) string { return filepath.Join(n.BPFDir(), NodeName(i)) }

// MountBPFFS mounts the lab's BPF filesystem (once).
func MountBPFFS(n Names) error {
	dir := n.BPFDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	if isBPFFS(dir) {
		return nil
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("lab %s: mount a BPF filesystem on %s: %w", n.Lab, dir, err)
	}
	return nil
}

// UnmountBPFFS unmounts the lab's BPF filesystem, if mounted: what its
// proxies pinned goes with it.
func UnmountBPFFS(n Names) error {
	dir := n.BPFDir()
	if !isBPFFS(dir) {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("lab %s: unmount %s: %w", n.Lab, dir, err)
	}
	return nil
}

func isBPFFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.BPF_FS_MAGIC
}

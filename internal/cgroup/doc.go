// Package cgroup finds the cgroup hierarchies of the caller's mount
// namespace, where cgroup v2 directories are made and BPF programs attached
// (Mounts, Root: /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified
// on a hybrid one), and manages directories in the cgroup v2 hierarchy that
// svcnet itself made: naming one (Child), creating it, opening it for
// clone3's CLONE_INTO_CGROUP (exec.Cmd's SysProcAttr.UseCgroupFD), listing
// the processes in it, and removing it once they have left.
//
// Contract: nothing here writes to a file of the hierarchy's root or of a
// directory the caller did not make; Remove only removes a child directory
// (rmdir) after the processes in it have exited, and signals none.
package cgroup

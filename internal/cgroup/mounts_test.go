package cgroup

import (
	"slices"
	"testing"

	"github.com/prometheus/procfs"
)

func TestPick(t *testing.T) {
	ms := []*procfs.MountInfo{
		{MountPoint: "/sys/fs/cgroup/systemd", FSType: "cgroup"},
		{MountPoint: "/proc", FSType: "proc"},
		{MountPoint: "/sys/fs/cgroup/unified", FSType: "cgroup2"},
		{MountPoint: "/sys/fs/cgroup/cpu", FSType: "cgroup"},
		{MountPoint: "/sys/fs/cgroup/cpu", FSType: "cgroup"},
		{MountPoint: "/run/other", FSType: "cgroup2"},
	}
	all, v2 := pick(ms)
	want := []string{"/run/other", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"}
	if !slices.Equal(all, want) || v2 != "/sys/fs/cgroup/unified" {
		t.Fatalf("pick = %q, %q; want %q, /sys/fs/cgroup/unified", all, v2, want)
	}
	if _, v2 := pick(ms[:2]); v2 != "" {
		t.Fatalf("no cgroup2 mount: v2 = %q", v2)
	}
}

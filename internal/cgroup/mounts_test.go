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

func TestCheckPath(t *testing.T) {
	for _, ok := range []string{"/", "/kubepods", "/svcnet-lab-demo/node1"} {
		if err := CheckPath(ok); err != nil {
			t.Errorf("CheckPath(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "kubepods", "/a/../b", "/a/", "//a", "/a/./b", "/a\nb", "/sys/fs/cgroup/../../etc"} {
		if err := CheckPath(bad); err == nil {
			t.Errorf("CheckPath(%q) accepted", bad)
		}
	}
}

func TestPath(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"/sys/fs/cgroup/unified", "/"},
		{"/sys/fs/cgroup/unified/svcnet-lab-x/node1", "/svcnet-lab-x/node1"},
	} {
		if got, err := Path("/sys/fs/cgroup/unified", tc.dir); err != nil || got != tc.want {
			t.Errorf("Path(%q) = %q, %v; want %q", tc.dir, got, err, tc.want)
		}
	}
	if got, err := Path("/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu"); err == nil {
		t.Errorf("Path outside the root = %q, want an error", got)
	}
}

package image

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// testCache is the cache the root tests share with the node tier (building the
// Debian tree and agnhost takes minutes, once).
func testCache(t *testing.T) *Builder {
	t.Helper()
	dir, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return &Builder{CacheDir: dir, Log: testLog{t}}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// mountsUnder lists the mount points at or below dir in this process's mount
// namespace (the host's).
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// TestDebianRootfs (root) builds, or finds in the cache, the test images'
// Debian tree and checks it holds what the images' commands need, nothing of
// the build host's, and that building it left no mount behind.
func TestDebianRootfs(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir, err := testCache(t).DebianRootfs(ctx, testDebian)
	if err != nil {
		t.Fatal(err)
	}
	bld := testCache(t)
	if m := mountsUnder(t, bld.CacheDir); len(m) > 0 {
		t.Errorf("mounts left in the cache: %q", m)
	}
	for _, p := range []string{
		"usr/bin/dig", "usr/bin/nslookup", "usr/bin/curl", "usr/bin/wget", "bin/nc.openbsd", "usr/bin/iperf",
		"usr/sbin/nginx", "usr/sbin/nft", "usr/sbin/iptables", "usr/sbin/conntrack", "usr/sbin/ipset",
		"bin/ip", "bin/ss", "usr/bin/ipcs", "bin/sh", "bin/bash", "bin/sleep", "usr/bin/timeout", "bin/ping",
	} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("tree lacks /%s: %v", p, err)
		}
	}
	for _, p := range []string{"etc/resolv.conf", "etc/hostname", "debootstrap"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("tree has /%s, the build's", p)
		}
	}
	// GNU wget, not busybox's: it names itself.
	out, err := exec.CommandContext(ctx, "chroot", dir, "/usr/bin/wget", "--version").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("GNU Wget")) {
		t.Errorf("chroot wget --version: %q, %v; want GNU Wget", firstLine(out), err)
	}
	again, err := testCache(t).DebianRootfs(ctx, Debian{Packages: append([]string{"wget"}, testDebian.Packages...)})
	if err != nil || again != dir {
		t.Errorf("same packages in another order and repeated: %s, %v; want the cached %s", again, err, dir)
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

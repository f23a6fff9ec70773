package image

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/process"
)

// rootfsVersion is part of a Debian tree's cache key: bump it when the steps
// that make the tree change.
const rootfsVersion = "debootstrap/2"

// Debian is a Debian root filesystem made by debootstrap: the variant's
// packages plus Packages and their dependencies, from one suite.
type Debian struct {
	Suite    string   // default "bookworm"
	Variant  string   // default "minbase" (Essential and Priority: required)
	Packages []string // installed besides the variant's
	Mirror   string   // default http://deb.debian.org/debian
}

func (d Debian) withDefaults() Debian {
	if d.Suite == "" {
		d.Suite = "bookworm"
	}
	if d.Variant == "" {
		d.Variant = "minbase"
	}
	if d.Mirror == "" {
		d.Mirror = "http://deb.debian.org/debian"
	}
	d.Packages = slices.Sorted(slices.Values(d.Packages))
	d.Packages = slices.Compact(d.Packages)
	return d
}

// hosts is the tree's /etc/hosts in place of the build host's (container
// runtimes mount their own over it, as over /etc/resolv.conf and
// /etc/hostname, which are left out).
const hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

// DebianRootfs returns the directory of the root filesystem d in the cache,
// keyed by its suite, variant, mirror and sorted package list, building it
// when missing (as root; about 1.5 minutes, most of it downloading).
//
// The host is left alone: debootstrap's first stage (--foreign) downloads and
// unpacks the packages into a directory of the cache; the second stage, which
// runs the packages' maintainer scripts in a chroot, runs in new mount,
// network, PID, UTS and IPC namespaces, so that the /proc and /sys it mounts,
// any process a script starts and any socket it opens vanish with it (while it
// installs, debootstrap's own policy-rc.d also forbids scripts to start
// services).
func (b *Builder) DebianRootfs(ctx context.Context, d Debian) (string, error) {
	d = d.withDefaults()
	cache, err := b.dir()
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("debian %s/%s + %d packages", d.Suite, d.Variant, len(d.Packages))
	key := hashJSON(struct {
		Format string
		Debian Debian
		Arch   string
	}{rootfsVersion, d, runtime.GOARCH})[:16]
	final := filepath.Join(cache, "rootfs", key)
	if exists(final) {
		return final, nil
	}
	unlock, err := lockFile(final + ".lock")
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	if exists(final) {
		return final, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%s: debootstrap needs root", what)
	}
	for _, prog := range []string{"debootstrap", "unshare", "chroot"} {
		if _, err := exec.LookPath(prog); err != nil {
			return "", fmt.Errorf("%s: %w (apt-get install debootstrap util-linux coreutils)", what, err)
		}
	}
	tmp := final + ".tmp"
	if err := removeTree(tmp); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	logPath := final + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer logFile.Close()
	start := time.Now()
	b.logf("building %s with debootstrap into %s (log %s)", what, final, logPath)

	run := func(stage string, argv ...string) error {
		fmt.Fprintf(logFile, "+ %s\n", strings.Join(argv, " "))
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: debootstrap %s: %w; last lines of %s:\n%s", what, stage, err, logPath, process.LogTail(logPath, 15))
		}
		return nil
	}
	first := []string{"debootstrap", "--foreign", "--variant=" + d.Variant, "--arch=" + runtime.GOARCH}
	if len(d.Packages) > 0 {
		first = append(first, "--include="+strings.Join(d.Packages, ","))
	}
	first = append(first, d.Suite, tmp, d.Mirror)
	if err := run("first stage", first...); err != nil {
		removeTree(tmp)
		return "", err
	}
	if err := run("second stage", "unshare", "--mount", "--net", "--pid", "--uts", "--ipc", "--fork", "--propagation", "private",
		"chroot", tmp, "/debootstrap/debootstrap", "--second-stage"); err != nil {
		removeTree(tmp)
		return "", err
	}
	if err := tidyRootfs(tmp); err != nil {
		removeTree(tmp)
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		removeTree(tmp)
		return "", fmt.Errorf("%s: %w", what, err)
	}
	b.logf("built %s in %s", what, time.Since(start).Round(time.Second))
	return final, nil
}

// tidyRootfs removes what an image should not carry: downloaded packages,
// package lists, the build host's name and resolver configuration; and what
// differs from one build to the next of the same packages: the install logs
// and ldconfig's auxiliary cache (time stamps), so that two builds from the
// same mirror state give the same layer.
func tidyRootfs(dir string) error {
	var remove []string
	for _, pat := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*", "var/log/*.log", "var/log/apt/*.log"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		remove = append(remove, m...)
	}
	for _, p := range append(remove, filepath.Join(dir, "etc/resolv.conf"), filepath.Join(dir, "etc/hostname"),
		filepath.Join(dir, "var/cache/ldconfig/aux-cache")) {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "etc/hosts"), []byte(hosts), 0o644)
}

// DebianLayer is the layer of a root filesystem from DebianRootfs: owners and
// file capabilities kept; /dev, /proc, /sys and /tmp empty (the runtime
// provides them).
func DebianLayer(dir, description string) Layer {
	return Layer{
		Description: description,
		Dir:         dir,
		KeepOwners:  true,
		Exclude:     []string{"/dev/*", "/proc/*", "/sys/*", "/tmp/*"},
	}
}

// removeTree removes dir, unless something is mounted below it (a build's
// namespace should have taken its mounts along; removing through a mount
// would delete the host's files).
func removeTree(dir string) error {
	if !exists(dir) {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == abs || strings.HasPrefix(fields[4], abs+"/")) {
			return fmt.Errorf("%s is still mounted; unmount it and remove %s", fields[4], abs)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return os.RemoveAll(abs)
}

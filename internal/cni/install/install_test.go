package install

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/cni/cnitest"
)

// testNode is one test's node: a root holding the CNI bin and conf dirs and the
// binary to install.
type testNode struct {
	t                       *testing.T
	root, bin, conf, source string
	opts                    Options
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	root := t.TempDir()
	n := &testNode{t: t, root: root, bin: filepath.Join(root, "opt/cni/bin"), conf: filepath.Join(root, "etc/cni/net.d"),
		source: filepath.Join(root, "image/svcnet")}
	for _, d := range []string{n.bin, n.conf, filepath.Dir(n.source)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.setSource("svcnet binary v1")
	n.opts = Options{Source: n.source, BinDir: n.bin, ConfDir: n.conf, ConfName: DefaultConfName}
	return n
}

func (n *testNode) setSource(content string) {
	n.t.Helper()
	if err := os.WriteFile(n.source, []byte(content), 0o755); err != nil {
		n.t.Fatal(err)
	}
}

func (n *testNode) write(path, content string) {
	n.t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		n.t.Fatal(err)
	}
}

func (n *testNode) read(path string) string {
	n.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		n.t.Fatal(err)
	}
	return string(b)
}

func (n *testNode) install(conflist string) Result {
	n.t.Helper()
	res, err := New(n.opts).Install([]byte(conflist))
	if err != nil {
		n.t.Fatalf("install: %v", err)
	}
	return res
}

func (n *testNode) uninstall() UninstallResult {
	n.t.Helper()
	res, err := New(n.opts).Uninstall()
	if err != nil {
		n.t.Fatalf("uninstall: %v", err)
	}
	return res
}

// Install writes the binary, loopback as its hard link, the conflist and the
// manifest; a second install writes nothing (same inodes, same mtimes);
// uninstall removes exactly those four and leaves the files of others.
func TestInstallIdempotentUninstallExact(t *testing.T) {
	n := newTestNode(t)
	foreignBin, foreignConf := filepath.Join(n.bin, "bridge"), filepath.Join(n.conf, "99-other.conflist")
	n.write(foreignBin, "reference bridge plugin")
	n.write(foreignConf, `{"name":"other"}`)

	res := n.install("conflist v1\n")
	bin, lo, conf, manifest := filepath.Join(n.bin, "svcnet"), filepath.Join(n.bin, "loopback"), filepath.Join(n.conf, DefaultConfName), filepath.Join(n.conf, ManifestName)
	if want := []string{manifest, bin, lo, conf}; !slices.Equal(res.Written, want) || len(res.Unchanged) > 0 {
		t.Fatalf("written %v unchanged %v, want written %v", res.Written, res.Unchanged, want)
	}
	if n.read(bin) != "svcnet binary v1" || n.read(conf) != "conflist v1\n" {
		t.Fatalf("contents %q %q", n.read(bin), n.read(conf))
	}
	if cnitest.Inode(t, bin) != cnitest.Inode(t, lo) {
		t.Errorf("loopback is not a hard link of svcnet")
	}
	for path, mode := range map[string]os.FileMode{bin: 0o755, conf: 0o644, manifest: 0o644} {
		if fi, _ := os.Stat(path); fi.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	if !strings.Contains(n.read(manifest), `"path": "`+lo+`"`) {
		t.Errorf("manifest does not record loopback:\n%s", n.read(manifest))
	}

	before := cnitest.Snapshot(t, n.root)
	inodes := map[string]uint64{}
	for _, p := range []string{bin, lo, conf, manifest} {
		inodes[p] = cnitest.Inode(t, p)
	}
	res = n.install("conflist v1\n")
	if len(res.Written) > 0 || len(res.Removed) > 0 || !slices.Equal(res.Unchanged, []string{bin, lo, conf}) {
		t.Fatalf("second install: written %v removed %v unchanged %v", res.Written, res.Removed, res.Unchanged)
	}
	if d := before.Diff(cnitest.Snapshot(t, n.root)); len(d) > 0 {
		t.Fatalf("second install changed files:\n%s", strings.Join(d, "\n"))
	}
	for p, ino := range inodes {
		if cnitest.Inode(t, p) != ino {
			t.Errorf("%s: inode changed", p)
		}
	}

	ures := n.uninstall()
	if want := []string{conf, lo, bin}; !ures.Manifest || !slices.Equal(ures.Removed, want) || len(ures.Left) > 0 {
		t.Fatalf("uninstall removed %v left %v, want %v", ures.Removed, ures.Left, want)
	}
	var left []string
	_ = filepath.WalkDir(n.root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return err
	})
	if want := []string{foreignConf, n.source, foreignBin}; !slices.Equal(slices.Sorted(slices.Values(left)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("after uninstall %v, want only %v", left, want)
	}
	if ures = n.uninstall(); ures.Manifest || len(ures.Removed) > 0 {
		t.Errorf("second uninstall: %+v, want nothing recorded", ures)
	}
}

// A loopback that is not the installer's (a distribution's reference
// plugin) is neither replaced nor recorded, so uninstall leaves it too.
func TestInstallLeavesForeignLoopback(t *testing.T) {
	n := newTestNode(t)
	lo := filepath.Join(n.bin, "loopback")
	n.write(lo, "reference loopback plugin")
	res := n.install("c\n")
	if slices.Contains(res.Written, lo) || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "another plugin's") {
		t.Fatalf("written %v notes %q", res.Written, res.Notes)
	}
	if strings.Contains(n.read(filepath.Join(n.conf, ManifestName)), lo) {
		t.Errorf("manifest records the foreign loopback")
	}
	n.uninstall()
	if n.read(lo) != "reference loopback plugin" {
		t.Errorf("foreign loopback changed")
	}
}

// A binary someone replaced after the install stays; the rest goes.
func TestUninstallLeavesReplacedBinary(t *testing.T) {
	n := newTestNode(t)
	n.install("c\n")
	bin := filepath.Join(n.bin, "svcnet")
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	n.write(bin, "someone else's svcnet")
	res := n.uninstall()
	if slices.Contains(res.Removed, bin) || len(res.Left) != 1 || !strings.HasPrefix(res.Left[0], bin+": content changed since install") {
		t.Fatalf("removed %v left %q", res.Removed, res.Left)
	}
	if n.read(bin) != "someone else's svcnet" {
		t.Errorf("replaced binary changed")
	}
	for _, p := range []string{filepath.Join(n.bin, "loopback"), filepath.Join(n.conf, DefaultConfName), filepath.Join(n.conf, ManifestName)} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
}

// A new binary replaces the old one and its loopback link; the manifest then
// records only the new content, and uninstall removes all of it.
func TestInstallUpgrade(t *testing.T) {
	n := newTestNode(t)
	n.install("c\n")
	n.setSource("svcnet binary v2")
	res := n.install("c\n")
	bin, lo := filepath.Join(n.bin, "svcnet"), filepath.Join(n.bin, "loopback")
	if !slices.Contains(res.Written, bin) || !slices.Contains(res.Written, lo) || n.read(lo) != "svcnet binary v2" || cnitest.Inode(t, bin) != cnitest.Inode(t, lo) {
		t.Fatalf("written %v; loopback %q", res.Written, n.read(lo))
	}
	files, ok, err := New(n.opts).readManifest()
	if err != nil || !ok || len(files) != 3 {
		t.Fatalf("manifest %+v %v %v, want three files", files, ok, err)
	}
	if res := n.uninstall(); len(res.Removed) != 3 || len(res.Left) > 0 {
		t.Fatalf("uninstall after upgrade: %+v", res)
	}
}

// A conflist an earlier install wrote under another name is removed when it
// still holds what was written, and left (with a note) when someone changed
// it.
func TestInstallRemovesStaleConflist(t *testing.T) {
	n := newTestNode(t)
	n.opts.ConfName = "05-svcnet.conflist"
	n.install("c\n")
	n.opts.ConfName = "10-svcnet.conflist"
	res := n.install("c\n")
	if !slices.Equal(res.Removed, []string{filepath.Join(n.conf, "05-svcnet.conflist")}) {
		t.Fatalf("removed %v, want the old conflist", res.Removed)
	}

	n.opts.ConfName = "20-svcnet.conflist"
	n.install("c\n")
	n.write(filepath.Join(n.conf, "20-svcnet.conflist"), "edited")
	n.opts.ConfName = "30-svcnet.conflist"
	res = n.install("c\n")
	if len(res.Removed) != 0 || !slices.ContainsFunc(res.Notes, func(s string) bool { return strings.Contains(s, "20-svcnet.conflist: content changed") }) {
		t.Fatalf("removed %v notes %q", res.Removed, res.Notes)
	}
	if n.read(filepath.Join(n.conf, "20-svcnet.conflist")) != "edited" {
		t.Errorf("edited conflist changed")
	}
	// It sorts before the conflist now in use.
	if !slices.ContainsFunc(res.Notes, func(s string) bool { return strings.Contains(s, "20-svcnet.conflist sorts before 30-svcnet.conflist") }) {
		t.Errorf("notes %q lack the shadowing conflist", res.Notes)
	}
}

// Without a manifest, uninstall removes nothing, even files of the names
// install would write.
func TestUninstallWithoutManifest(t *testing.T) {
	n := newTestNode(t)
	n.write(filepath.Join(n.bin, "svcnet"), "a svcnet")
	n.write(filepath.Join(n.conf, DefaultConfName), "a conflist")
	before := cnitest.Snapshot(t, n.root)
	if res := n.uninstall(); res.Manifest || len(res.Removed) > 0 {
		t.Fatalf("%+v", res)
	}
	if d := before.Diff(cnitest.Snapshot(t, n.root)); len(d) > 0 {
		t.Fatalf("changed: %v", d)
	}
}

// A manifest naming a file outside the two directories is refused by both
// commands, and nothing is touched.
func TestHostileManifest(t *testing.T) {
	n := newTestNode(t)
	victim := filepath.Join(n.root, "victim")
	n.write(victim, "precious")
	m := encodeManifest([]File{{Path: victim, SHA256: "4e1b40b0c3c6b1d4e3ba1ee9f2e2bd0b5ea5d1d7cfa2c4e1b0c1b0c8bd6e1f1a"}})
	n.write(filepath.Join(n.conf, ManifestName), string(m))
	before := cnitest.Snapshot(t, n.root)
	if _, err := New(n.opts).Uninstall(); err == nil || !strings.Contains(err.Error(), "not in") {
		t.Errorf("uninstall: %v", err)
	}
	if _, err := New(n.opts).Install([]byte("c\n")); err == nil || !strings.Contains(err.Error(), ManifestName) {
		t.Errorf("install: %v", err)
	}
	if d := before.Diff(cnitest.Snapshot(t, n.root)); len(d) > 0 {
		t.Fatalf("changed: %v", d)
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{BinDir: "/opt/cni/bin", ConfDir: "/etc/cni/net.d", ConfName: "10-svcnet.conflist"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.BinDir = "opt/cni/bin" }, "--cni-bin-dir"},
		{func(o *Options) { o.ConfDir = "/etc/cni/net.d/" }, "--cni-conf-dir"},
		{func(o *Options) { o.ConfDir = o.BinDir }, "two directories"},
		{func(o *Options) { o.ConfName = "10-svcnet.conf" }, "--conf-file-name"},
		{func(o *Options) { o.ConfName = "../10-svcnet.conflist" }, "--conf-file-name"},
	} {
		o := ok
		tc.change(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", o, err, tc.want)
		}
	}
}

// Two installers of different binaries racing on one node (an old and a new
// Pod during a rollout) leave a manifest that matches the files: uninstall
// then removes everything and leaves nothing behind.
func TestConcurrentInstallers(t *testing.T) {
	n := newTestNode(t)
	other := filepath.Join(n.root, "image", "svcnet-v2")
	n.write(other, "svcnet binary v2")
	errs := make(chan error, 2)
	for _, src := range []string{n.source, other} {
		o := n.opts
		o.Source = src
		go func() {
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				_, err = New(o).Install([]byte("conflist of " + src + "\n"))
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if res := n.uninstall(); len(res.Left) > 0 || len(res.Removed) != 3 {
		t.Fatalf("uninstall after racing installs: %+v", res)
	}
	ents, _ := os.ReadDir(n.bin)
	confs, _ := os.ReadDir(n.conf)
	if len(ents)+len(confs) != 0 {
		t.Fatalf("left: %v %v", ents, confs)
	}
}

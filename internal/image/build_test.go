package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

// testTree makes a directory tree with a file, an executable, a symbolic
// link, a hard link and a subdirectory, and returns its path.
func testTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "etc", "app"), 0o750))
	must(os.WriteFile(filepath.Join(dir, "etc", "app", "conf"), []byte("a=1\n"), 0o640))
	must(os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.Link(filepath.Join(dir, "bin", "tool"), filepath.Join(dir, "bin", "tool2")))
	must(os.Symlink("tool", filepath.Join(dir, "bin", "t")))
	must(os.MkdirAll(filepath.Join(dir, "dev", "pts"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "dev", "junk"), nil, 0o644))
	return dir
}

func testImage(tree string) Image {
	return Image{
		Refs: []string{"registry.example/test/app:v1", "registry.example/test/app:latest"},
		Layers: []Layer{
			{Description: "tree", Dir: tree, Exclude: []string{"/dev/*"}},
			{Description: "files", Files: []File{
				{Path: "/usr/local/bin/app", Mode: 0o755, Data: []byte("binary"), Capabilities: []int{10}},
				{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
				{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n")},
				{Path: "/bin/app", Mode: fs.ModeSymlink | 0o777, Target: "/usr/local/bin/app"},
				{Path: "/home/u", Mode: fs.ModeDir | 0o700, UID: 1000, GID: 1000},
			}},
		},
		Config: Config{
			Entrypoint: []string{"/usr/local/bin/app"}, Cmd: []string{"serve"},
			Env: []string{"A=b"}, WorkingDir: "/home/u", User: "1000:1000",
			ExposedPorts: []string{"80/tcp"},
		},
	}
}

func fileSHA(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// TestBuildDeterministic: the same inputs give the same digests and a
// byte-identical archive, in another cache and with other time stamps and
// owners on the input files; a changed byte gives another digest.
func TestBuildDeterministic(t *testing.T) {
	ctx := context.Background()
	tree := testTree(t)
	a, err := (&Builder{CacheDir: t.TempDir()}).Build(ctx, testImage(tree))
	if err != nil {
		t.Fatal(err)
	}
	// Other mtimes on every input file.
	later := time.Now().Add(time.Hour)
	filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type() != fs.ModeSymlink {
			os.Chtimes(p, later, later)
		}
		return err
	})
	b, err := (&Builder{CacheDir: t.TempDir()}).Build(ctx, testImage(tree))
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || a.ID != b.ID || a.Size != b.Size {
		t.Errorf("rebuilt image differs: %+v vs %+v", a, b)
	}
	if fa, fb := fileSHA(t, a.Path), fileSHA(t, b.Path); fa != fb {
		t.Errorf("archives differ: sha256 %s vs %s", fa, fb)
	}
	if !strings.HasPrefix(a.Digest, "sha256:") || !strings.HasPrefix(a.ID, "sha256:") {
		t.Errorf("digest %q id %q, want sha256:...", a.Digest, a.ID)
	}

	if err := os.WriteFile(filepath.Join(tree, "etc", "app", "conf"), []byte("a=2\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	c, err := (&Builder{CacheDir: t.TempDir()}).Build(ctx, testImage(tree))
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest == a.Digest || c.ID == a.ID {
		t.Errorf("changed content, same digest %s", c.Digest)
	}
}

// TestBuildCached: a second build of the same image is the cached archive,
// not written again; another reference is another archive of the same image.
func TestBuildCached(t *testing.T) {
	ctx := context.Background()
	bld := &Builder{CacheDir: t.TempDir()}
	img := testImage(testTree(t))
	a, err := bld.Build(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	fi1, err := os.Stat(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(a.Path, old, old); err != nil {
		t.Fatal(err)
	}
	b, err := bld.Build(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	fi2, err := os.Stat(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	if b.Path != a.Path || b.Digest != a.Digest || !fi2.ModTime().Equal(old) || !os.SameFile(fi1, fi2) {
		t.Errorf("second build %+v (mtime %v), want the cached %+v untouched", b, fi2.ModTime(), a)
	}
	img.Refs = []string{"registry.example/other:v2"}
	c, err := bld.Build(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path == a.Path || c.Digest != a.Digest {
		t.Errorf("retagged: %+v, want a new archive of digest %s", c, a.Digest)
	}
	layers, _ := filepath.Glob(filepath.Join(bld.CacheDir, "layers", "*.tar.gz"))
	if len(layers) != 2 {
		t.Errorf("layer cache holds %d layers, want the image's 2: %v", len(layers), layers)
	}
}

// TestBuildTags: the archive is an OCI layout whose index.json names the image
// by each reference (the manifest's digest being the Tarball's) and a
// docker-archive whose manifest.json tags it with every reference, in order;
// go-containerregistry reads it back both ways.
func TestBuildTags(t *testing.T) {
	img := testImage(testTree(t))
	tb, err := (&Builder{CacheDir: t.TempDir()}).Build(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	var m tarball.Manifest
	if err := json.Unmarshal(archiveMember(t, tb.Path, "manifest.json"), &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, img.Refs) {
		t.Fatalf("manifest.json %+v, want one image tagged %q", m, img.Refs)
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(archiveMember(t, tb.Path, "index.json"), &index); err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, d := range index.Manifests {
		named = append(named, d.Annotations[annotationImageName]+" "+d.Annotations[annotationRefName])
		if d.Digest.String() != tb.Digest || d.MediaType != types.OCIManifestSchema1 || d.Platform == nil || d.Platform.OS != "linux" {
			t.Errorf("index.json entry %+v, want %s (%s, linux)", d, tb.Digest, types.OCIManifestSchema1)
		}
	}
	if want := []string{img.Refs[0] + " v1", img.Refs[1] + " latest"}; !slices.Equal(named, want) {
		t.Errorf("index.json names %q, want %q", named, want)
	}

	// The OCI layout, unpacked, holds the very manifest.
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xf", tb.Path, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf: %v\n%s", err, out)
	}
	lidx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := v1.NewHash(tb.Digest)
	oimg, err := lidx.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := oimg.Digest(); err != nil || d.String() != tb.Digest {
		t.Errorf("OCI layout image digest %v (%v), want %s", d, err, tb.Digest)
	}
	if layers, err := oimg.Layers(); err != nil || len(layers) != 2 {
		t.Errorf("OCI layout image: %d layers (%v), want 2", len(layers), err)
	}

	for _, ref := range img.Refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tarball.ImageFromPath(tb.Path, &tag)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		// A docker-archive reader makes its own manifest; the
		// configuration, and so the image ID, is the same.
		id, err := got.ConfigName()
		if err != nil || id.String() != tb.ID {
			t.Errorf("%s: image ID %v (%v), want %s", ref, id, err, tb.ID)
		}
		cfg, err := got.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		want := v1.Config{
			Entrypoint: []string{"/usr/local/bin/app"}, Cmd: []string{"serve"},
			Env: []string{"PATH=" + DefaultPath, "A=b"}, WorkingDir: "/home/u", User: "1000:1000",
			ExposedPorts: map[string]struct{}{"80/tcp": {}},
		}
		if g := cfg.Config; !slices.Equal(g.Entrypoint, want.Entrypoint) || !slices.Equal(g.Cmd, want.Cmd) ||
			!slices.Equal(g.Env, want.Env) || g.WorkingDir != want.WorkingDir || g.User != want.User || len(g.ExposedPorts) != 1 {
			t.Errorf("%s: config %+v, want %+v", ref, g, want)
		}
		if cfg.OS != "linux" || cfg.Architecture == "" || !cfg.Created.Equal(epoch) || len(cfg.History) != 2 || cfg.History[1].CreatedBy != "files" {
			t.Errorf("%s: os %q arch %q created %v history %+v", ref, cfg.OS, cfg.Architecture, cfg.Created, cfg.History)
		}
	}
}

// TestBuildLayerContents: each layer holds exactly the entries the inputs
// make, canonical: sorted, parents first, epoch time stamps, no owner names,
// modes, links and file capabilities kept.
func TestBuildLayerContents(t *testing.T) {
	img := testImage(testTree(t))
	tb, err := (&Builder{CacheDir: t.TempDir()}).Build(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(img.Refs[0])
	got, err := tarball.ImageFromPath(tb.Path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("%d layers, %v; want 2", len(layers), err)
	}
	wants := [][]string{{
		"bin/ dir 755 0:0",
		"bin/t symlink 777 0:0 -> tool",
		"bin/tool reg 755 0:0 #!/bin/sh\\necho hi\\n",
		"bin/tool2 hardlink 755 0:0 -> bin/tool",
		"dev/ dir 755 0:0",
		"etc/ dir 750 0:0",
		"etc/app/ dir 750 0:0",
		"etc/app/conf reg 640 0:0 a=1\\n",
	}, {
		"bin/ dir 755 0:0",
		"bin/app symlink 777 0:0 -> /usr/local/bin/app",
		"etc/ dir 755 0:0",
		"etc/passwd reg 644 0:0 root:x:0:0:root:/root:/sbin/nologin\\n",
		"home/ dir 755 0:0",
		"home/u/ dir 700 1000:1000",
		"tmp/ dir 1777 0:0",
		"usr/ dir 755 0:0",
		"usr/local/ dir 755 0:0",
		"usr/local/bin/ dir 755 0:0",
		"usr/local/bin/app reg 755 0:0 binary caps=" + fmt.Sprintf("%x", capabilityValue([]int{10})),
	}}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		lines := describeTar(t, rc)
		rc.Close()
		if !slices.Equal(lines, wants[i]) {
			t.Errorf("layer %d:\n%s\nwant:\n%s", i, strings.Join(lines, "\n"), strings.Join(wants[i], "\n"))
		}
	}
}

// describeTar renders each entry as "name type mode uid:gid content", failing
// t on a time stamp other than the epoch or an owner name.
func describeTar(t *testing.T, r io.Reader) []string {
	t.Helper()
	tr := tar.NewReader(r)
	var out []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v uname %q gname %q, want the epoch and none", h.Name, h.ModTime, h.Uname, h.Gname)
		}
		s := fmt.Sprintf("%s %s %o %d:%d", h.Name, map[byte]string{
			tar.TypeReg: "reg", tar.TypeDir: "dir", tar.TypeSymlink: "symlink", tar.TypeLink: "hardlink",
		}[h.Typeflag], h.Mode, h.Uid, h.Gid)
		switch h.Typeflag {
		case tar.TypeSymlink, tar.TypeLink:
			s += " -> " + h.Linkname
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			s += " " + strings.ReplaceAll(string(b), "\n", `\n`)
		}
		if c, ok := h.PAXRecords[paxXattrPrefix+capabilityXattr]; ok {
			s += fmt.Sprintf(" caps=%x", c)
		}
		out = append(out, s)
	}
}

// archiveMember returns member name of the tar file p.
func archiveMember(t *testing.T, p, member string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s has no %s: %v", p, member, err)
		}
		if h.Name == member {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// TestBuildTarLayer: a tar input is taken in its order with time stamps,
// owner names and other PAX records dropped, plain or gzip-compressed.
func TestBuildTarLayer(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Now()},
		{Name: "./b/", Typeflag: tar.TypeDir, Mode: 0o700, Uid: 5, Uname: "five", ModTime: time.Now()},
		{Name: "./b/x", Typeflag: tar.TypeReg, Mode: 0o600, Size: 1, ModTime: time.Now(), PAXRecords: map[string]string{"comment": "c"}},
		{Name: "a", Typeflag: tar.TypeLink, Linkname: "./b/x", ModTime: time.Now()},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size == 1 {
			tw.Write([]byte("x"))
		}
	}
	tw.Close()
	p := filepath.Join(t.TempDir(), "in.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeLayer(&out, &Layer{Tar: p}); err != nil {
		t.Fatal(err)
	}
	want := []string{"b/ dir 700 5:0", "b/x reg 600 0:0 x", "a hardlink 0 0:0 -> b/x"}
	if got := describeTar(t, &out); !slices.Equal(got, want) {
		t.Errorf("tar layer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestBuildBadInput: each bad input fails with an error naming the image and
// what is wrong with it, before anything is written.
func TestBuildBadInput(t *testing.T) {
	tree := testTree(t)
	sock := filepath.Join(t.TempDir(), "s")
	if err := makeSocket(sock); err != nil {
		t.Fatal(err)
	}
	withLayers := func(ls ...Layer) Image {
		return Image{Refs: []string{"registry.example/bad:v1"}, Layers: ls}
	}
	for _, tc := range []struct {
		name string
		img  Image
		want []string
	}{
		{"no ref", Image{Layers: []Layer{{Dir: tree}}}, []string{"no reference"}},
		{"ref without tag", Image{Refs: []string{"registry.example/bad"}, Layers: []Layer{{Dir: tree}}}, []string{`"registry.example/bad"`, "REGISTRY/REPOSITORY:TAG"}},
		{"ref without registry", Image{Refs: []string{"bad:v1"}, Layers: []Layer{{Dir: tree}}}, []string{`"bad:v1"`}},
		{"missing source", withLayers(Layer{Files: []File{{Path: "/bin/x", Mode: 0o755, Source: "/nonexistent/svcnet"}}}),
			[]string{"registry.example/bad:v1", "layer 0", "file /bin/x", "/nonexistent/svcnet", "no such file"}},
		{"missing dir", withLayers(Layer{Description: "rootfs", Dir: "/nonexistent/rootfs"}),
			[]string{"layer 0 (rootfs)", "/nonexistent/rootfs"}},
		{"relative path", withLayers(Layer{Files: []File{{Path: "bin/x", Data: []byte{}}}}), []string{`"bin/x"`, "absolute"}},
		{"twice", withLayers(Layer{Files: []File{{Path: "/x", Data: []byte{}}, {Path: "/x", Data: []byte{}}}}), []string{"/x", "twice"}},
		{"tar with files", withLayers(Layer{Tar: "/t.tar", Files: []File{{Path: "/x", Data: []byte{}}}}), []string{"/t.tar", "no Dir or Files"}},
		{"empty layer", withLayers(Layer{}), []string{"layer 0", "empty"}},
		{"file over dir", withLayers(Layer{Dir: tree, Files: []File{{Path: "/etc", Data: []byte{}}}}), []string{"/etc", "directory"}},
		{"parent is a file", withLayers(Layer{Files: []File{{Path: "/a", Data: []byte{}}, {Path: "/a/b", Data: []byte{}}}}), []string{"/a/b", "parent /a"}},
		{"socket", withLayers(Layer{Dir: filepath.Dir(sock)}), []string{sock, "socket"}},
		{"bad env", Image{Refs: []string{"registry.example/bad:v1"}, Layers: []Layer{{Dir: tree}}, Config: Config{Env: []string{"NOVALUE"}}}, []string{`"NOVALUE"`, "KEY=VALUE"}},
		{"bad capability", withLayers(Layer{Files: []File{{Path: "/x", Data: []byte{}, Capabilities: []int{99}}}}), []string{"/x", "capabilities"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			_, err := (&Builder{CacheDir: cache}).Build(context.Background(), tc.img)
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(cache, "*", "*.tar*")); len(left) > 0 {
				t.Errorf("files written: %v", left)
			}
		})
	}
}

// makeSocket leaves a Unix socket file at p.
func makeSocket(p string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrUnix{Name: p})
}

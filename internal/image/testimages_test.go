package image

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbin"
)

// TestTestImageRefs: the references are the ones the e2e framework of the
// Kubernetes version tools/k8s builds names (test/utils/image/manifest.go of
// that module), so that the specs' Pods find the imported images.
func TestTestImageRefs(t *testing.T) {
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := k8sModuleDir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "test/utils/image/manifest.go"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	registries := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\w+Registry):\s+"([^"]+)",`).FindAllStringSubmatch(src, -1) {
		registries[m[1]] = m[2]
	}
	e2e := map[string]string{}
	for _, m := range regexp.MustCompile(`configs\[(\w+)\] = Config\{list\.(\w+), "([^"]+)", "([^"]+)"\}`).FindAllStringSubmatch(src, -1) {
		reg := registries[strings.ToUpper(m[2][:1])+m[2][1:]]
		if reg == "" {
			t.Fatalf("manifest.go: no registry %s for %s", m[2], m[1])
		}
		e2e[m[1]] = reg + "/" + m[3] + ":" + m[4]
	}
	for id, ref := range map[string]string{
		"Pause": PauseImage, "Agnhost": AgnhostImage, "BusyBox": BusyBoxImage,
		"GlibcDnsTesting": GlibcDNSTestingImage, "Nginx": NginxImage, "NginxNew": NginxNewImage,
		"RegressionIssue74839": RegressionIssue74839Image, "DistrolessIptables": DistrolessIptablesImage,
	} {
		if e2e[id] != ref {
			t.Errorf("%s: built as %q, the e2e framework names it %q", id, ref, e2e[id])
		}
	}
}

// fakeTestInputs makes stand-ins for the test images' inputs: static ELF
// files for the programs, a Debian tree with /etc/passwd and /etc/group, and
// agnhost's porter certificate and key.
func fakeTestInputs(t *testing.T) (in testInput, pause, rootfs string) {
	t.Helper()
	dir := t.TempDir()
	in = testInput{
		k8sModule: filepath.Join(dir, "k8s"), k8sVersion: "v1.36.3", coreDNSVersion: "v1.15.0",
		k8sBin: filepath.Join(dir, "bin"), coreDNS: filepath.Join(dir, "coredns"),
	}
	rootfs, pause = filepath.Join(dir, "rootfs"), filepath.Join(dir, "pause")
	porter := filepath.Join(in.k8sModule, "test/images/agnhost/porter")
	for _, d := range []string{in.k8sBin, porter, filepath.Join(rootfs, "etc"), filepath.Join(rootfs, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{pause, in.coreDNS, filepath.Join(in.k8sBin, "agnhost"), filepath.Join(in.k8sBin, "kube-proxy"), filepath.Join(in.k8sBin, "regression-issue-74839")} {
		writeELF(t, p, false)
	}
	for p, content := range map[string]string{
		filepath.Join(porter, "localhost.crt"):   "CERT",
		filepath.Join(porter, "localhost.key"):   "KEY",
		filepath.Join(rootfs, "etc", "passwd"):   "root:x:0:0:root:/root:/bin/bash\n",
		filepath.Join(rootfs, "etc", "group"):    "root:x:0:", // no final newline
		filepath.Join(rootfs, "bin", "sh"):       "#!",
		filepath.Join(rootfs, "etc", "hostname"): "",
	} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return in, pause, rootfs
}

// TestTestImages: each test image is what its upstream Dockerfile makes, in
// the parts the specs rely on.
func TestTestImages(t *testing.T) {
	in, pause, rootfs := fakeTestInputs(t)
	imgs, err := testImages(in, pause, rootfs)
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]Image{}
	var refs []string
	for _, img := range imgs {
		for _, r := range img.Refs {
			byRef[r] = img
			refs = append(refs, r)
		}
		if err := img.validate(); err != nil {
			t.Errorf("%s: %v", img.Refs[0], err)
		}
	}
	want := []string{PauseImage, AgnhostImage, BusyBoxImage, GlibcDNSTestingImage, NginxImage, NginxNewImage,
		RegressionIssue74839Image, DistrolessIptablesImage, KubeProxyRepository + ":v1.36.3", CoreDNSRepository + ":v1.15.0"}
	if !slices.Equal(slices.Sorted(slices.Values(refs)), slices.Sorted(slices.Values(want))) {
		t.Errorf("references %q, want %q", refs, want)
	}
	files := func(ref string) map[string]File {
		m := map[string]File{}
		for _, l := range byRef[ref].Layers {
			for _, f := range l.Files {
				m[f.Path] = f
			}
		}
		return m
	}

	p := byRef[PauseImage]
	if len(p.Layers) != 1 || !slices.Equal(p.Config.Entrypoint, []string{"/pause"}) || p.Config.User != "65535:65535" {
		t.Errorf("pause: %d layers, config %+v; want only /pause, run as 65535:65535", len(p.Layers), p.Config)
	}

	a, af := byRef[AgnhostImage], files(AgnhostImage)
	if a.Layers[0].Dir != rootfs || !slices.Equal(a.Config.Entrypoint, []string{"/agnhost"}) || !slices.Equal(a.Config.Cmd, []string{"pause"}) || a.Config.WorkingDir != "" {
		t.Errorf("agnhost: base %q config %+v; want the Debian tree, /agnhost pause, working directory /", a.Layers[0].Dir, a.Config)
	}
	for path, check := range map[string]func(File) bool{
		"/agnhost":       func(f File) bool { return f.Source == filepath.Join(in.k8sBin, "agnhost") && f.Mode == 0o755 },
		"/agnhost-2":     func(f File) bool { return f.Mode.Type() == fs.ModeSymlink && f.Target == "agnhost" },
		"/coredns":       func(f File) bool { return f.Source == in.coreDNS },
		"/localhost.crt": func(f File) bool { return strings.HasSuffix(f.Source, "porter/localhost.crt") },
		"/localhost.key": func(f File) bool { return strings.HasSuffix(f.Source, "porter/localhost.key") },
		"/uploads":       func(f File) bool { return f.Mode.IsDir() },
		"/etc/passwd": func(f File) bool {
			return string(f.Data) == "root:x:0:0:root:/root:/bin/bash\nuser-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"
		},
		"/etc/group": func(f File) bool {
			return string(f.Data) == "root:x:0:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"
		},
		"/home/user-defined-in-image": func(f File) bool { return f.Mode.IsDir() && f.UID == 1000 && f.GID == 1000 },
	} {
		if f, ok := af[path]; !ok || !check(f) {
			t.Errorf("agnhost: %s is %+v (present %v)", path, f, ok)
		}
	}

	c, cf := byRef[CoreDNSRepository+":v1.15.0"], files(CoreDNSRepository+":v1.15.0")
	if f := cf["/coredns"]; !slices.Equal(f.Capabilities, []int{capNetBindService}) || c.Config.User != "65532:65532" || c.Layers[0].Dir != "" {
		t.Errorf("coredns: /coredns %+v, user %q, base %q; want cap_net_bind_service, nonroot, the static base", f, c.Config.User, c.Layers[0].Dir)
	}
	if _, ok := cf["/etc/passwd"]; !ok {
		t.Error("coredns: no /etc/passwd for its nonroot user")
	}
	if f := files(KubeProxyRepository + ":v1.36.3")["/usr/local/bin/kube-proxy"]; f.Source != filepath.Join(in.k8sBin, "kube-proxy") {
		t.Errorf("kube-proxy: /usr/local/bin/kube-proxy %+v", f)
	}
	if n := byRef[NginxImage]; !slices.Equal(n.Config.Cmd, []string{"nginx", "-g", "daemon off;"}) {
		t.Errorf("nginx: command %q, want nginx in the foreground", n.Config.Cmd)
	}

	writeELF(t, in.coreDNS, true)
	if _, err := testImages(in, pause, rootfs); err == nil || !strings.Contains(err.Error(), in.coreDNS) {
		t.Errorf("dynamic coredns: %v, want an error naming it", err)
	}
}

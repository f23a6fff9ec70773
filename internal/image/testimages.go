package image

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/testbin"
)

// The test images' references, exactly as the e2e framework of
// k8s.io/kubernetes v1.36.3 names them (test/utils/image/manifest.go), so that
// the specs' Pods (imagePullPolicy IfNotPresent) find them imported. Only the
// images sig-network specs and the e2e framework's network helpers use are
// built.
const (
	PauseImage                = "registry.k8s.io/pause:3.10.2"
	AgnhostImage              = "registry.k8s.io/e2e-test-images/agnhost:2.63.0"
	BusyBoxImage              = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
	GlibcDNSTestingImage      = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0"
	NginxImage                = "registry.k8s.io/e2e-test-images/nginx:1.15-4"
	NginxNewImage             = "registry.k8s.io/e2e-test-images/nginx:1.27-0"
	RegressionIssue74839Image = "registry.k8s.io/e2e-test-images/regression-issue-74839:1.4"
	DistrolessIptablesImage   = "registry.k8s.io/build-image/distroless-iptables:v0.9.6"
)

// The repositories of the upstream components run side by side with svcnet;
// their tags are the versions tools/k8s and tools/coredns build.
const (
	KubeProxyRepository = "registry.k8s.io/kube-proxy"
	CoreDNSRepository   = "registry.k8s.io/coredns/coredns"
)

// testDebian is the one Debian tree under every Debian-based test image, so
// that a node stores its layer once. Its packages are the union of what the
// images' upstream Dockerfiles install:
//   - agnhost (upstream: Alpine with bind-tools, curl, netcat-openbsd,
//     iproute2, iperf, bash, util-linux-misc, and busybox's wget and ping):
//     dnsutils, curl, netcat-openbsd, iproute2, iperf, wget, iputils-ping,
//     procps;
//   - glibc-dns-testing (Debian with dnsutils);
//   - busybox: the commands specs run in it (sh, sleep, nc, wget), GNU wget
//     rather than busybox-static's, which segfaults here;
//   - nginx (upstream: nginx on Alpine): Debian's nginx;
//   - distroless-iptables and kube-proxy (upstream: distroless with
//     iptables, ipset, conntrack and nftables): iptables, nftables,
//     conntrack, ipset, kmod.
var testDebian = Debian{Packages: []string{
	"conntrack", "curl", "dnsutils", "iperf", "ipset", "iproute2", "iptables", "iputils-ping",
	"kmod", "netcat-openbsd", "nftables", "nginx", "procps", "wget",
}}

// TestImageOptions says where BuildTestImages finds its inputs.
type TestImageOptions struct {
	// Builder builds into its cache (a zero Builder when nil).
	Builder *Builder
	// RepoRoot is the repository (tools/k8s, tools/coredns); default: the
	// module root above the working directory.
	RepoRoot string
	// K8sBinDir holds agnhost, kube-proxy and regression-issue-74839; default
	// $SVCNET_K8S_BIN, else tools/k8s/build.sh builds them (cached).
	K8sBinDir string
	// CoreDNSBinDir holds a static coredns; default $SVCNET_COREDNS_BIN, else
	// tools/coredns/build.sh builds it (cached).
	CoreDNSBinDir string
}

// BuildTestImages builds, or takes from the cache, every image the node tier
// imports besides svcnet's, and returns their archives: pause, agnhost,
// busybox, glibc-dns-testing, nginx, regression-issue-74839,
// distroless-iptables, kube-proxy and CoreDNS. It needs root (debootstrap
// makes the Debian tree, once) and gcc with libc6-dev (pause).
func BuildTestImages(ctx context.Context, o TestImageOptions) ([]Tarball, error) {
	b := o.Builder
	if b == nil {
		b = &Builder{}
	}
	cache, err := b.dir()
	if err != nil {
		return nil, err
	}
	in, err := testInputs(ctx, o)
	if err != nil {
		return nil, err
	}
	pause, err := b.pauseBinary(ctx, cache, in.k8sModule, "3.10.2-"+in.k8sVersion)
	if err != nil {
		return nil, err
	}
	rootfs, err := b.DebianRootfs(ctx, testDebian)
	if err != nil {
		return nil, fmt.Errorf("test images: %w", err)
	}
	imgs, err := testImages(in, pause, rootfs)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	out := make([]Tarball, 0, len(imgs))
	for _, img := range imgs {
		tb, err := b.Build(ctx, img)
		if err != nil {
			return nil, err
		}
		out = append(out, tb)
	}
	b.logf("%d test images ready in %s", len(out), time.Since(start).Round(100*time.Millisecond))
	return out, nil
}

// testInput is what the test images are made of besides Debian's packages.
type testInput struct {
	k8sModule      string // the module k8s.io/kubernetes's directory
	k8sVersion     string // tools/k8s/VERSION
	coreDNSVersion string // tools/coredns/VERSION
	k8sBin         string // agnhost, kube-proxy, regression-issue-74839
	coreDNS        string // a static coredns
}

func testInputs(ctx context.Context, o TestImageOptions) (testInput, error) {
	var in testInput
	root := o.RepoRoot
	if root == "" {
		r, err := testbin.ModuleRoot()
		if err != nil {
			return in, fmt.Errorf("test images: %w", err)
		}
		root = r
	}
	for _, v := range []struct {
		file string
		into *string
	}{{"tools/k8s/VERSION", &in.k8sVersion}, {"tools/coredns/VERSION", &in.coreDNSVersion}} {
		b, err := os.ReadFile(filepath.Join(root, v.file))
		if err != nil {
			return in, fmt.Errorf("test images: %w", err)
		}
		*v.into = strings.TrimSpace(string(b))
	}
	var err error
	if in.k8sModule, err = k8sModuleDir(ctx, root); err != nil {
		return in, fmt.Errorf("test images: %w", err)
	}
	k8sCmds := []string{"agnhost", "kube-proxy", "regression-issue-74839"}
	in.k8sBin = firstNonEmpty(o.K8sBinDir, os.Getenv(EnvK8sBin))
	if in.k8sBin != "" {
		err = executables(in.k8sBin, k8sCmds...)
	} else {
		in.k8sBin, err = scriptDir(ctx, root, "tools/k8s/build.sh", k8sCmds, k8sCmds...)
	}
	if err != nil {
		return in, fmt.Errorf("test images: %w", err)
	}
	coreDNSDir := firstNonEmpty(o.CoreDNSBinDir, os.Getenv(EnvCoreDNSBin))
	if coreDNSDir != "" {
		err = executables(coreDNSDir, "coredns")
	} else {
		coreDNSDir, err = scriptDir(ctx, root, "tools/coredns/build.sh", nil, "coredns")
	}
	if err != nil {
		return in, fmt.Errorf("test images: %w", err)
	}
	in.coreDNS = filepath.Join(coreDNSDir, "coredns")
	return in, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// testImages describes the test images, each as its upstream Dockerfile
// builds it (the differences are named).
func testImages(in testInput, pause, rootfs string) ([]Image, error) {
	if err := checkStatic(pause); err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	if err := checkStatic(in.coreDNS); err != nil {
		return nil, fmt.Errorf("coredns image: %w", err)
	}
	static, err := staticBase()
	if err != nil {
		return nil, err
	}
	debian := DebianLayer(rootfs, "debian bookworm minbase: "+strings.Join(testDebian.Packages, " "))
	agnhostUsers, err := agnhostUserFiles(rootfs)
	if err != nil {
		return nil, err
	}
	coreDNSFile := File{Path: "/coredns", Mode: 0o755, Source: in.coreDNS}
	porter := filepath.Join(in.k8sModule, "test", "images", "agnhost", "porter")
	return []Image{{
		// build/pause: FROM scratch, the static pause, USER 65535:65535.
		Refs:   []string{PauseImage},
		Layers: []Layer{{Description: "pause.c, gcc -static", Files: []File{{Path: "/pause", Mode: 0o755, Source: pause}}}},
		Config: Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
	}, {
		// test/images/agnhost: agnhost and agnhost-2 in /, TLS key and
		// certificate in the working directory (/) for porter's TLS ports,
		// /uploads for netexec, /coredns, the user and group of the
		// supplemental-groups specs. Not included: /var/registry, the fake
		// registry's content (pulled from registries when upstream builds).
		Refs: []string{AgnhostImage},
		Layers: []Layer{debian, {Description: "agnhost", Files: append(agnhostUsers,
			File{Path: "/agnhost", Mode: 0o755, Source: filepath.Join(in.k8sBin, "agnhost")},
			File{Path: "/agnhost-2", Mode: fs.ModeSymlink | 0o777, Target: "agnhost"},
			coreDNSFile,
			File{Path: "/localhost.crt", Mode: 0o644, Source: filepath.Join(porter, "localhost.crt")},
			File{Path: "/localhost.key", Mode: 0o644, Source: filepath.Join(porter, "localhost.key")},
			File{Path: "/uploads", Mode: fs.ModeDir | 0o755},
		)}},
		Config: Config{
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"},
			ExposedPorts: []string{"80/tcp", "8080/tcp", "8081/tcp", "9376/tcp", "5000/tcp"},
		},
	}, {
		// test/images/busybox is busybox itself; specs run sh, sleep, nc
		// and wget in it.
		Refs:   []string{BusyBoxImage},
		Layers: []Layer{debian},
		Config: Config{Cmd: []string{"sh"}},
	}, {
		// test/images/glibc-dns-testing: Debian with dnsutils, and /coredns.
		Refs:   []string{GlibcDNSTestingImage},
		Layers: []Layer{debian, {Description: "coredns", Files: []File{coreDNSFile}}},
		Config: Config{Cmd: []string{"bash"}},
	}, {
		// test/images/nginx: nginx serving on port 80 in the foreground.
		Refs:   []string{NginxImage, NginxNewImage},
		Layers: []Layer{debian},
		Config: Config{Cmd: []string{"nginx", "-g", "daemon off;"}, ExposedPorts: []string{"80/tcp"}},
	}, {
		// test/images/regression-issue-74839 on debian-base.
		Refs: []string{RegressionIssue74839Image},
		Layers: []Layer{debian, {Description: "regression-issue-74839", Files: []File{
			{Path: "/regression-issue-74839", Mode: 0o755, Source: filepath.Join(in.k8sBin, "regression-issue-74839")},
		}}},
		Config: Config{Entrypoint: []string{"/regression-issue-74839"}},
	}, {
		// distroless-iptables: iptables, nftables, conntrack, ipset.
		Refs:   []string{DistrolessIptablesImage},
		Layers: []Layer{debian},
	}, {
		// kube-proxy's image: distroless-iptables plus the binary.
		Refs: []string{KubeProxyRepository + ":" + in.k8sVersion},
		Layers: []Layer{debian, {Description: "kube-proxy", Files: []File{
			{Path: "/usr/local/bin/kube-proxy", Mode: 0o755, Source: filepath.Join(in.k8sBin, "kube-proxy")},
		}}},
	}, {
		// CoreDNS's Dockerfile: distroless static (nonroot), /coredns with
		// cap_net_bind_service=+ep, USER nonroot. Not included: CA
		// certificates (forwarding over TLS only).
		Refs: []string{CoreDNSRepository + ":" + in.coreDNSVersion},
		Layers: []Layer{static, {Description: "coredns, cap_net_bind_service=+ep", Files: []File{
			{Path: "/coredns", Mode: 0o755, Source: in.coreDNS, Capabilities: []int{capNetBindService}},
		}}},
		Config: Config{Entrypoint: []string{"/coredns"}, User: "65532:65532", ExposedPorts: []string{"53/tcp", "53/udp"}},
	}}, nil
}

// capNetBindService is CAP_NET_BIND_SERVICE (linux/capability.h).
const capNetBindService = 10

// agnhostUserFiles are /etc/passwd and /etc/group of rootfs with what
// agnhost's Dockerfile adds (adduser -u 1000 user-defined-in-image, addgroup
// -g 50000 group-defined-in-image with that user), and the user's home.
func agnhostUserFiles(rootfs string) ([]File, error) {
	add := map[string]string{
		"/etc/passwd": "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n",
		"/etc/group":  "user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n",
	}
	var files []File
	for _, p := range []string{"/etc/group", "/etc/passwd"} {
		b, err := os.ReadFile(filepath.Join(rootfs, p))
		if err != nil {
			return nil, fmt.Errorf("agnhost image: %w", err)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		files = append(files, File{Path: p, Mode: 0o644, Data: append(b, add[p]...)})
	}
	return append(files, File{Path: "/home/user-defined-in-image", Mode: fs.ModeDir | 0o755, UID: 1000, GID: 1000}), nil
}

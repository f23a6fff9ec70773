package image

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
)

// SvcnetRepository is the repository `make image` tags svcnet's image in; the
// manifests in deploy/ name it, with the tag "latest" (kustomize's images
// field points them elsewhere).
const SvcnetRepository = "ghcr.io/svcnet/svcnet"

// SvcnetBinary is where the svcnet binary lives in its image: on $PATH, as the
// manifests' commands (`svcnet proxy ...`) expect.
const SvcnetBinary = "/usr/local/bin/svcnet"

// baseFiles is the root filesystem a static program needs around it, as
// distroless/static has: /etc/passwd and /etc/group with root, nobody (the
// user deploy/dns and deploy/lb run as) and nonroot; /etc/nsswitch.conf, so
// that host names resolve from /etc/hosts first; a sticky /tmp. The Dockerfile
// at the repository's root copies the same files.
//
//go:embed rootfs
var baseFiles embed.FS

// staticBase is the layer of baseFiles.
func staticBase() (Layer, error) {
	l := Layer{Description: "static base: /etc/passwd, /etc/group, /etc/nsswitch.conf, /tmp, /home/nonroot"}
	err := fs.WalkDir(baseFiles, "rootfs", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := baseFiles.ReadFile(p)
		if err != nil {
			return err
		}
		l.Files = append(l.Files, File{Path: path.Join("/", p[len("rootfs"):]), Mode: 0o644, Data: b})
		return nil
	})
	if err != nil {
		return Layer{}, fmt.Errorf("static base: %w", err)
	}
	l.Files = append(l.Files,
		File{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		File{Path: "/home/nonroot", Mode: fs.ModeDir | 0o700, UID: 65532, GID: 65532},
	)
	return l, nil
}

// Svcnet is svcnet's image: the static binary at binary as SvcnetBinary over
// the static base, tagged refs. svcnet's components run nothing else: proxy,
// lb and the layer-2 speaker program the kernel over netlink and raw sockets,
// dns serves from memory, and `cni` copies itself; so the image holds no
// other program.
func Svcnet(binary string, refs ...string) (Image, error) {
	if err := checkStatic(binary); err != nil {
		return Image{}, fmt.Errorf("svcnet image: %w", err)
	}
	base, err := staticBase()
	if err != nil {
		return Image{}, err
	}
	return Image{
		Refs: refs,
		Layers: []Layer{base, {
			Description: "svcnet " + SvcnetBinary,
			Files:       []File{{Path: SvcnetBinary, Mode: 0o755, Source: binary}},
		}},
		Config: Config{Entrypoint: []string{SvcnetBinary}},
	}, nil
}

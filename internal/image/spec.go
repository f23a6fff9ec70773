package image

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// DefaultPath is the PATH an image's environment gets when its Config sets
// none: Docker's default, which container runtimes also assume.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Image describes one single-platform (linux on the build's architecture)
// image: its layers, bottom first, its configuration and the references it is
// tagged with.
type Image struct {
	// Refs are the full references the image is tagged with, registry and tag
	// explicit (registry.k8s.io/pause:3.10.2); at least one.
	Refs   []string
	Layers []Layer
	Config Config
}

// Config is the part of the OCI image configuration a container runtime uses.
type Config struct {
	Entrypoint []string
	Cmd        []string
	// Env holds KEY=VALUE entries. PATH=DefaultPath is added when no entry
	// sets PATH.
	Env        []string
	WorkingDir string
	// User is USER[:GROUP], names or numeric IDs.
	User string
	// ExposedPorts are PORT/PROTO entries (80/tcp, 53/udp); documentation only.
	ExposedPorts []string
	Labels       map[string]string
}

// Layer is one filesystem layer: either a directory tree plus single files,
// or an existing tar file. Its tar stream is canonical: entries sorted by path
// (a directory before what it holds), parent directories made (0755, root)
// where missing, every time stamp fixed at the Unix epoch, no user or group
// names; so the same inputs give the same bytes and the same digest.
type Layer struct {
	// Description says where the layer came from; it becomes the layer's
	// history entry (created_by) in the image configuration.
	Description string
	// Dir is a host directory whose tree becomes the image's root: Dir/a/b is
	// /a/b. Regular files, directories, symbolic links, hard links (within the
	// tree), device nodes and FIFOs are kept with their permission bits and
	// file capabilities (the security.capability extended attribute);
	// sockets are refused.
	Dir string
	// Exclude are slash-separated patterns (path.Match) of image paths left
	// out of Dir's tree, with everything below them: "/dev/*" keeps /dev but
	// not what it holds.
	Exclude []string
	// KeepOwners keeps the UID and GID of Dir's files; otherwise they are
	// root's (0:0).
	KeepOwners bool
	// Files are single files, directories and symbolic links, placed over
	// Dir's tree; a path given twice in one layer is an error.
	Files []File
	// Tar is an existing tar file (plain or gzip-compressed) taken as the
	// whole layer, its entries in their order, with time stamps and user and
	// group names dropped. It excludes Dir and Files.
	Tar string
}

// File is one entry of a Layer. Its kind comes from Mode's type bits: a
// regular file (none), a directory (fs.ModeDir) or a symbolic link
// (fs.ModeSymlink).
type File struct {
	// Path is absolute and clean: /usr/local/bin/svcnet.
	Path string
	// Mode holds the permission bits (with fs.ModeSetuid, fs.ModeSetgid and
	// fs.ModeSticky where wanted) and the type bits above.
	Mode fs.FileMode
	// Source is a host file whose content a regular file takes; when empty,
	// Data is the content.
	Source string
	Data   []byte
	// Target is a symbolic link's target.
	Target   string
	UID, GID int
	// Capabilities are file capabilities given to the program in its
	// permitted and effective sets, as `setcap cap_x=+ep FILE` does
	// (capability numbers from linux/capability.h: 10 is
	// CAP_NET_BIND_SERVICE).
	Capabilities []int
}

// validate checks what can be checked without reading files, and names the
// offending image, layer and entry.
func (img *Image) validate() error {
	if len(img.Refs) == 0 {
		return fmt.Errorf("image has no reference to be tagged with")
	}
	for _, r := range img.Refs {
		if _, err := parseRef(r); err != nil {
			return err
		}
	}
	for _, e := range img.Config.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return fmt.Errorf("image %s: environment entry %q is not KEY=VALUE", img.Refs[0], e)
		}
	}
	for _, p := range img.Config.ExposedPorts {
		if _, proto, ok := strings.Cut(p, "/"); !ok || (proto != "tcp" && proto != "udp" && proto != "sctp") {
			return fmt.Errorf("image %s: exposed port %q is not PORT/tcp, PORT/udp or PORT/sctp", img.Refs[0], p)
		}
	}
	for i, l := range img.Layers {
		if err := l.validate(); err != nil {
			return fmt.Errorf("image %s: layer %d (%s): %w", img.Refs[0], i, l.name(), err)
		}
	}
	return nil
}

// parseRef accepts a reference with an explicit registry and tag only: an
// image imported into a node's runtime is found by exactly that name.
func parseRef(r string) (name.Tag, error) {
	t, err := name.NewTag(r, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q: %w (want REGISTRY/REPOSITORY:TAG)", r, err)
	}
	return t, nil
}

func (l *Layer) name() string {
	switch {
	case l.Description != "":
		return l.Description
	case l.Tar != "":
		return "tar " + l.Tar
	case l.Dir != "":
		return "dir " + l.Dir
	}
	return fmt.Sprintf("%d files", len(l.Files))
}

func (l *Layer) validate() error {
	if l.Tar != "" && (l.Dir != "" || len(l.Files) > 0) {
		return fmt.Errorf("tar %s: a tar layer takes no Dir or Files", l.Tar)
	}
	if l.Tar == "" && l.Dir == "" && len(l.Files) == 0 {
		return fmt.Errorf("empty layer: no Dir, Files or Tar")
	}
	for _, p := range l.Exclude {
		if _, err := path.Match(p, "/"); err != nil || !path.IsAbs(p) {
			return fmt.Errorf("exclude pattern %q: want an absolute path.Match pattern", p)
		}
	}
	seen := map[string]bool{}
	for _, f := range l.Files {
		if err := f.validate(); err != nil {
			return err
		}
		if seen[f.Path] {
			return fmt.Errorf("file %s: given twice", f.Path)
		}
		seen[f.Path] = true
	}
	return nil
}

func (f *File) validate() error {
	if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
		return fmt.Errorf("file %q: path must be absolute, clean and not /", f.Path)
	}
	if f.UID < 0 || f.GID < 0 {
		return fmt.Errorf("file %s: negative owner %d:%d", f.Path, f.UID, f.GID)
	}
	switch f.Mode.Type() {
	case 0:
		if f.Target != "" {
			return fmt.Errorf("file %s: a regular file has no link target", f.Path)
		}
		if f.Source != "" && f.Data != nil {
			return fmt.Errorf("file %s: both Source and Data", f.Path)
		}
	case fs.ModeDir, fs.ModeSymlink:
		if f.Source != "" || f.Data != nil {
			return fmt.Errorf("file %s: a %s has no content", f.Path, kindName(f.Mode))
		}
		if (f.Mode.Type() == fs.ModeSymlink) != (f.Target != "") {
			return fmt.Errorf("file %s: a symbolic link, and only one, has a Target", f.Path)
		}
		if len(f.Capabilities) > 0 {
			return fmt.Errorf("file %s: capabilities on a %s", f.Path, kindName(f.Mode))
		}
	default:
		return fmt.Errorf("file %s: mode %v: want a regular file, directory or symbolic link", f.Path, f.Mode)
	}
	if slices.ContainsFunc(f.Capabilities, func(c int) bool { return c < 0 || c > maxCapability }) {
		return fmt.Errorf("file %s: capabilities %v: each must be 0..%d", f.Path, f.Capabilities, maxCapability)
	}
	return nil
}

func kindName(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symbolic link"
	}
	return "regular file"
}

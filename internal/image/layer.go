package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// epoch is every entry's modification time, and the image's creation time.
var epoch = time.Unix(0, 0).UTC()

// entry is one tar entry of a Dir/Files layer before it is written.
type entry struct {
	hdr tar.Header // Name is the clean absolute image path here
	// src is the host file a regular entry's content is read from; data is
	// the content when src is empty.
	src  string
	data []byte
	// inode identifies a host file with more than one link, so that its
	// other names in the tree become hard links.
	inode  [2]uint64
	origin string // where the entry came from, for errors
}

// writeLayer writes l's canonical tar stream to w.
func writeLayer(w io.Writer, l *Layer) error {
	if l.Tar != "" {
		return copyTar(w, l.Tar)
	}
	entries, err := collect(l)
	if err != nil {
		return err
	}
	return writeEntries(w, entries)
}

// collect gathers a Dir/Files layer's entries, with missing parents, sorted.
func collect(l *Layer) ([]*entry, error) {
	byPath := map[string]*entry{}
	if l.Dir != "" {
		if err := walkDir(l, byPath); err != nil {
			return nil, err
		}
	}
	for i := range l.Files {
		e, err := fileEntry(&l.Files[i])
		if err != nil {
			return nil, err
		}
		// A file replaces what Dir has at its path, but a directory and a
		// non-directory never replace each other: the tree below would be
		// orphaned or the file lost.
		if prev, ok := byPath[e.hdr.Name]; ok && (prev.hdr.Typeflag == tar.TypeDir) != (e.hdr.Typeflag == tar.TypeDir) {
			return nil, fmt.Errorf("file %s: a %s over the %s of %s", e.hdr.Name,
				typeName(e.hdr.Typeflag), typeName(prev.hdr.Typeflag), prev.origin)
		}
		byPath[e.hdr.Name] = e
	}
	for p := range byPath {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if e, ok := byPath[dir]; ok {
				if e.hdr.Typeflag != tar.TypeDir {
					return nil, fmt.Errorf("%s: parent %s is not a directory (%s)", p, dir, e.origin)
				}
				continue
			}
			byPath[dir] = &entry{hdr: tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}, origin: "parent of " + p}
		}
	}
	out := make([]*entry, 0, len(byPath))
	for _, e := range byPath {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hdr.Name < out[j].hdr.Name })
	return out, nil
}

func fileEntry(f *File) (*entry, error) {
	e := &entry{
		hdr:    tar.Header{Name: f.Path, Mode: tarMode(f.Mode), Uid: f.UID, Gid: f.GID},
		origin: "file " + f.Path,
	}
	switch f.Mode.Type() {
	case fs.ModeDir:
		e.hdr.Typeflag = tar.TypeDir
	case fs.ModeSymlink:
		e.hdr.Typeflag, e.hdr.Linkname = tar.TypeSymlink, f.Target
	default:
		e.hdr.Typeflag = tar.TypeReg
		if f.Source != "" {
			fi, err := os.Stat(f.Source)
			if err != nil {
				return nil, fmt.Errorf("file %s: source: %w", f.Path, err)
			}
			if !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("file %s: source %s is not a regular file", f.Path, f.Source)
			}
			e.src, e.hdr.Size = f.Source, fi.Size()
		} else {
			e.data, e.hdr.Size = f.Data, int64(len(f.Data))
		}
		if len(f.Capabilities) > 0 {
			e.hdr.PAXRecords = map[string]string{paxXattrPrefix + capabilityXattr: capabilityValue(f.Capabilities)}
		}
	}
	return e, nil
}

func typeName(t byte) string {
	if t == tar.TypeDir {
		return "directory"
	}
	return "non-directory"
}

// tarMode converts permission and special bits to the tar (and stat) encoding.
func tarMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// walkDir adds the entries of l.Dir's tree.
func walkDir(l *Layer, byPath map[string]*entry) error {
	root := filepath.Clean(l.Dir)
	fi, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("dir %s: not a directory", root)
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("dir %s: %w", root, err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		imgPath := "/" + filepath.ToSlash(rel)
		for _, pat := range l.Exclude {
			if ok, _ := path.Match(pat, imgPath); ok {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		e, err := dirEntry(p, imgPath, l.KeepOwners)
		if err != nil {
			return fmt.Errorf("dir %s: %w", root, err)
		}
		byPath[imgPath] = e
		return nil
	})
}

// dirEntry makes the entry of host file p, placed at imgPath.
func dirEntry(p, imgPath string, keepOwners bool) (*entry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Type() == fs.ModeSocket {
		return nil, fmt.Errorf("%s: a socket cannot be stored in a layer", p)
	}
	var link string
	if fi.Mode().Type() == fs.ModeSymlink {
		if link, err = os.Readlink(p); err != nil {
			return nil, err
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	e := &entry{hdr: tar.Header{
		Name: imgPath, Typeflag: hdr.Typeflag, Linkname: hdr.Linkname, Size: hdr.Size,
		Mode: tarMode(fi.Mode()), Devmajor: hdr.Devmajor, Devminor: hdr.Devminor,
	}, origin: "dir file " + p}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("%s: no stat data", p)
	}
	if keepOwners {
		e.hdr.Uid, e.hdr.Gid = int(st.Uid), int(st.Gid)
	}
	if e.hdr.Typeflag == tar.TypeReg {
		e.src = p
		if st.Nlink > 1 {
			e.inode = [2]uint64{st.Dev, st.Ino}
		}
		caps, err := getxattr(p, capabilityXattr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if caps != nil {
			e.hdr.PAXRecords = map[string]string{paxXattrPrefix + capabilityXattr: string(caps)}
		}
	}
	return e, nil
}

// getxattr returns p's extended attribute attr, or nil when it has none.
func getxattr(p, attr string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, attr, buf)
		switch {
		case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE):
			buf = make([]byte, 2*len(buf))
			continue
		case err != nil:
			return nil, fmt.Errorf("getxattr %s: %w", attr, err)
		}
		return buf[:n], nil
	}
}

// writeEntries writes sorted entries as a tar stream. The first path of a
// multiply-linked host file holds the content; its other paths link to it.
func writeEntries(w io.Writer, entries []*entry) error {
	tw := tar.NewWriter(w)
	firstLink := map[[2]uint64]string{}
	for _, e := range entries {
		hdr := e.hdr
		hdr.Name = strings.TrimPrefix(hdr.Name, "/")
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		hdr.ModTime = epoch
		if e.inode != ([2]uint64{}) {
			if first, ok := firstLink[e.inode]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size, hdr.PAXRecords = tar.TypeLink, first, 0, nil
				if err := tw.WriteHeader(&hdr); err != nil {
					return fmt.Errorf("%s: %w", e.origin, err)
				}
				continue
			}
			firstLink[e.inode] = hdr.Name
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return fmt.Errorf("%s: %w", e.origin, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if err := copyContent(tw, e); err != nil {
			return err
		}
	}
	return tw.Close()
}

// copyContent writes a regular entry's content, which must still have the
// size it had when the entry was made.
func copyContent(w io.Writer, e *entry) error {
	if e.src == "" {
		_, err := w.Write(e.data)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return fmt.Errorf("%s: %w", e.origin, err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, e.hdr.Size+1))
	if err == nil && n != e.hdr.Size {
		err = fmt.Errorf("size changed from %d to %d bytes while read", e.hdr.Size, n)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", e.origin, err)
	}
	return nil
}

// copyTar copies the tar file p (plain or gzip) entry by entry, dropping time
// stamps, user and group names and every PAX record but extended attributes.
func copyTar(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	defer f.Close()
	r, err := maybeGunzip(f)
	if err != nil {
		return fmt.Errorf("tar %s: %w", p, err)
	}
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("tar %s: %w", p, err)
		}
		switch hdr.Typeflag {
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		default:
			return fmt.Errorf("tar %s: %s: entry type %q is not supported", p, hdr.Name, hdr.Typeflag)
		}
		out := tar.Header{
			Name: cleanTarName(hdr.Name, hdr.Typeflag == tar.TypeDir), Typeflag: hdr.Typeflag,
			Linkname: hdr.Linkname, Size: hdr.Size, Mode: hdr.Mode, Uid: hdr.Uid, Gid: hdr.Gid,
			Devmajor: hdr.Devmajor, Devminor: hdr.Devminor, ModTime: epoch,
		}
		if hdr.Typeflag == tar.TypeLink {
			out.Linkname = cleanTarName(hdr.Linkname, false)
		}
		for k, v := range hdr.PAXRecords {
			if strings.HasPrefix(k, paxXattrPrefix) {
				if out.PAXRecords == nil {
					out.PAXRecords = map[string]string{}
				}
				out.PAXRecords[k] = v
			}
		}
		if out.Name == "" {
			continue // the archive's root, "./"
		}
		if err := tw.WriteHeader(&out); err != nil {
			return fmt.Errorf("tar %s: %s: %w", p, hdr.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("tar %s: %s: %w", p, hdr.Name, err)
		}
	}
	return tw.Close()
}

// cleanTarName makes a member name relative and clean ("./a//b" is "a/b"),
// with a directory's trailing slash.
func cleanTarName(n string, dir bool) string {
	n = strings.TrimPrefix(path.Clean("/"+n), "/")
	if dir && n != "" {
		n += "/"
	}
	return n
}

// maybeGunzip returns r decompressed when it starts with gzip's magic.
func maybeGunzip(r io.Reader) (io.Reader, error) {
	buf := make([]byte, 2)
	n, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	r = io.MultiReader(bytes.NewReader(buf[:n]), r)
	if n == 2 && buf[0] == 0x1f && buf[1] == 0x8b {
		return gzipReader(r)
	}
	return r, nil
}

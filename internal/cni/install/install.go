package install

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/cni"
)

// Defaults of Options: the directories kubelet's runtimes use.
const (
	DefaultBinDir   = "/opt/cni/bin"
	DefaultConfDir  = "/etc/cni/net.d"
	DefaultConfName = "10-svcnet.conflist"
)

// Options say what to install where.
type Options struct {
	// Source is the svcnet binary to install.
	Source string
	// BinDir is the CNI bin dir (CNI_PATH), ConfDir the CNI conf dir, and
	// ConfName the conflist's file name in it.
	BinDir, ConfDir, ConfName string
}

// Validate checks the options: absolute canonical directories, a conflist
// name of one element ending in .conflist, a source that is a regular file.
func (o Options) Validate() error {
	for _, d := range []struct{ flag, dir string }{{"--cni-bin-dir", o.BinDir}, {"--cni-conf-dir", o.ConfDir}} {
		if !filepath.IsAbs(d.dir) || filepath.Clean(d.dir) != d.dir {
			return fmt.Errorf("%s %q: want an absolute path in canonical form", d.flag, d.dir)
		}
	}
	if o.BinDir == o.ConfDir {
		return fmt.Errorf("--cni-bin-dir and --cni-conf-dir are both %s: want two directories", o.BinDir)
	}
	if o.ConfName != filepath.Base(o.ConfName) || !strings.HasSuffix(o.ConfName, ".conflist") || o.ConfName == ".conflist" {
		return fmt.Errorf("--conf-file-name %q: want a file name ending in .conflist", o.ConfName)
	}
	return nil
}

// Result says what an install did.
type Result struct {
	// Written are the paths written, Unchanged those that already had the
	// content.
	Written, Unchanged []string
	// Removed are files of an earlier install that this one no longer
	// writes.
	Removed []string
	// Notes explain what was left alone (a foreign loopback, a stale file
	// someone replaced) and what may stop a runtime from using the network
	// (conf files that sort before the conflist).
	Notes []string
}

// UninstallResult says what an uninstall did.
type UninstallResult struct {
	// Manifest is false when nothing was recorded (never installed, or
	// uninstalled already): nothing is removed then.
	Manifest bool
	Removed  []string
	// Left are recorded files left in place, with the reason.
	Left []string
}

// Installer installs svcnet's CNI plugin into a node's CNI directories and
// removes exactly that again. It keeps the hashes of files it has read, by
// identity (device, inode, size, times), so a repeated Install reads only
// files that changed.
type Installer struct {
	Options
	hashes map[fileID]string
}

// New returns an installer for o.
func New(o Options) *Installer {
	return &Installer{Options: o, hashes: map[fileID]string{}}
}

func (in *Installer) binPath() string      { return filepath.Join(in.BinDir, cni.PluginType) }
func (in *Installer) loopbackPath() string { return filepath.Join(in.BinDir, cni.LoopbackType) }
func (in *Installer) confPath() string     { return filepath.Join(in.ConfDir, in.ConfName) }
func (in *Installer) manifestPath() string { return filepath.Join(in.ConfDir, ManifestName) }

// Install makes the node's CNI directories hold the plugin and conflist:
//
//   - BinDir/svcnet: a copy of Source;
//   - BinDir/loopback: a hard link to it (a copy where linking fails), the
//     loopback plugin by its name, unless a loopback that is not the
//     installer's is there (left alone, with a note);
//   - ConfDir/ConfName: conflist;
//   - ConfDir/ManifestName: what was written, with content hashes.
//
// Each file is replaced atomically (temporary file in the same directory,
// rename), binaries before the conflist so a runtime never sees a network
// whose plugin is missing, and only when its content differs: a repeated
// Install with the same input writes nothing. The manifest is written first
// with the old and new hashes of every file, so a crash half way still leaves
// every file the installer wrote recorded; files an earlier install recorded
// and this one does not write are removed if they still hold the recorded
// content.
func (in *Installer) Install(conflist []byte) (Result, error) {
	var res Result
	if err := os.MkdirAll(in.ConfDir, 0o755); err != nil {
		return res, err
	}
	unlock, err := in.lock()
	if err != nil {
		return res, err
	}
	defer unlock()
	srcState, err := in.state(in.Source)
	if err != nil {
		return res, err
	}
	if !srcState.Regular {
		return res, fmt.Errorf("source %s: not a regular file", in.Source)
	}
	src := srcState.SHA256
	old, _, err := in.readManifest()
	if err != nil {
		return res, err
	}
	lbState, err := in.state(in.loopbackPath())
	if err != nil {
		return res, err
	}
	withLoopback, why := loopbackAction(lbState, in.loopbackPath(), old, src)
	if !withLoopback {
		res.Notes = append(res.Notes, why)
	}
	confSum := sha256.Sum256(conflist)
	files := []File{{Path: in.binPath(), SHA256: src}}
	if withLoopback {
		files = append(files, File{Path: in.loopbackPath(), SHA256: src})
	}
	files = append(files, File{Path: in.confPath(), SHA256: hex.EncodeToString(confSum[:])})

	if err := in.writeManifest(merge(files, old), &res); err != nil {
		return res, err
	}
	if err := in.ensure(in.binPath(), src, &res, func() error { return in.copySource(in.binPath()) }); err != nil {
		return res, err
	}
	if withLoopback {
		err := in.ensure(in.loopbackPath(), src, &res, func() error {
			if err := atomicfile.Link(in.binPath(), in.loopbackPath()); err == nil {
				return nil
			}
			return in.copySource(in.loopbackPath())
		})
		if err != nil {
			return res, err
		}
	}
	err = in.ensure(in.confPath(), files[len(files)-1].SHA256, &res, func() error {
		return atomicfile.Write(in.confPath(), conflist, 0o644)
	})
	if err != nil {
		return res, err
	}
	final := files
	for _, v := range in.plan(stale(old, files)) {
		switch {
		case v.Remove:
			if err := removeFile(v.Path); err != nil {
				final = append(final, fileEntries(old, v.Path)...)
				res.Notes = append(res.Notes, err.Error())
				continue
			}
			res.Removed = append(res.Removed, v.Path)
		case v.Reason != "":
			res.Notes = append(res.Notes, v.Path+": "+v.Reason+"; left as it is")
		}
	}
	if err := in.writeManifest(final, &res); err != nil {
		return res, err
	}
	res.Notes = append(res.Notes, in.shadowing()...)
	return res, nil
}

// Uninstall removes what the manifest records, newest-written first (the
// conflist before the binaries), each file only while it holds content the
// installer wrote there; then the manifest. Files that changed since are left
// and reported; with no manifest nothing is removed. When a removal fails,
// the manifest keeps the entries not removed and the error says which.
func (in *Installer) Uninstall() (UninstallResult, error) {
	var res UninstallResult
	unlock, err := in.lock()
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil // no conf dir: nothing recorded
	}
	if err != nil {
		return res, err
	}
	defer unlock()
	recorded, ok, err := in.readManifest()
	if err != nil || !ok {
		return res, err
	}
	res.Manifest = true
	verdicts := in.plan(recorded)
	var failed []File
	var errs []error
	for _, v := range slices.Backward(verdicts) {
		switch {
		case v.Remove:
			if err := removeFile(v.Path); err != nil {
				errs = append(errs, err)
				failed = append(failed, fileEntries(recorded, v.Path)...)
				continue
			}
			res.Removed = append(res.Removed, v.Path)
		case v.Reason != "":
			res.Left = append(res.Left, v.Path+": "+v.Reason)
		}
	}
	if len(errs) > 0 {
		if err := atomicfile.Write(in.manifestPath(), encodeManifest(failed), 0o644); err != nil {
			errs = append(errs, err)
		}
		return res, errors.Join(errs...)
	}
	if err := removeFile(in.manifestPath()); err != nil {
		return res, err
	}
	return res, nil
}

// lock takes an exclusive flock on ConfDir itself, so installers and
// uninstallers on one node (an old Pod's and a new Pod's during a rollout)
// take turns and the manifest always matches the files. The returned func
// releases it.
func (in *Installer) lock() (func(), error) {
	f, err := os.Open(in.ConfDir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", in.ConfDir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", in.ConfDir, err)
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// plan is planRemoval over what is at the recorded paths now.
func (in *Installer) plan(recorded []File) []verdict {
	now := map[string]fileState{}
	for _, f := range recorded {
		if _, ok := now[f.Path]; ok {
			continue
		}
		st, err := in.state(f.Path)
		if err != nil {
			// Unreadable: treat as not the installer's, never removed.
			st = fileState{Exists: true}
		}
		now[f.Path] = st
	}
	return planRemoval(recorded, now)
}

func fileEntries(files []File, path string) []File {
	var out []File
	for _, f := range files {
		if f.Path == path {
			out = append(out, f)
		}
	}
	return out
}

// ensure makes path hold content of hash sum, calling write when it does not.
func (in *Installer) ensure(path, sum string, res *Result, write func() error) error {
	st, err := in.state(path)
	if err != nil {
		return err
	}
	if st.Regular && st.SHA256 == sum {
		res.Unchanged = append(res.Unchanged, path)
		return nil
	}
	if err := write(); err != nil {
		return err
	}
	res.Written = append(res.Written, path)
	return nil
}

func (in *Installer) copySource(path string) error {
	f, err := os.Open(in.Source)
	if err != nil {
		return fmt.Errorf("source %s: %w", in.Source, err)
	}
	defer f.Close()
	return atomicfile.WriteFunc(path, 0o755, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
}

// readManifest returns the recorded files, and whether there is a manifest.
func (in *Installer) readManifest() ([]File, bool, error) {
	b, err := os.ReadFile(in.manifestPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("manifest: %w", err)
	}
	files, err := parseManifest(in.manifestPath(), b, in.BinDir, in.ConfDir)
	return files, err == nil, err
}

// writeManifest makes the manifest record files, writing it only when its
// content differs.
func (in *Installer) writeManifest(files []File, res *Result) error {
	b := encodeManifest(files)
	if cur, err := os.ReadFile(in.manifestPath()); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	if err := atomicfile.Write(in.manifestPath(), b, 0o644); err != nil {
		return err
	}
	if !slices.Contains(res.Written, in.manifestPath()) {
		res.Written = append(res.Written, in.manifestPath())
	}
	return nil
}

// shadowing lists the network configuration files in ConfDir that sort
// before the conflist: a runtime that uses one network (containerd's
// max_conf_num = 1, CRI-O's default) takes the first.
func (in *Installer) shadowing() []string {
	ents, err := os.ReadDir(in.ConfDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		switch filepath.Ext(e.Name()) {
		case ".conf", ".conflist", ".json":
			if e.Name() < in.ConfName {
				out = append(out, fmt.Sprintf("%s sorts before %s: a runtime that uses the first network configuration uses it, not svcnet's", filepath.Join(in.ConfDir, e.Name()), in.ConfName))
			}
		}
	}
	return out
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// fileID identifies a file's content without reading it: a file with the
// same identity has the same content unless someone went out of their way.
type fileID struct {
	dev, ino, size uint64
	mtime, ctime   syscall.Timespec
}

// state reports what is at path, hashing a regular file unless its identity
// is one already hashed.
func (in *Installer) state(path string) (fileState, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileState{}, nil
	}
	if err != nil {
		return fileState{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fileState{Exists: true}, nil
	}
	var id fileID
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id = fileID{dev: st.Dev, ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim, ctime: st.Ctim}
		if sum, ok := in.hashes[id]; ok {
			return fileState{Exists: true, Regular: true, SHA256: sum}, nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return fileState{}, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fileState{}, fmt.Errorf("read %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if id != (fileID{}) {
		in.hashes[id] = sum
	}
	return fileState{Exists: true, Regular: true, SHA256: sum}, nil
}

// Package atomicfile writes files so that readers, and a crash, see the old or the
// new content, never a torn one.
package atomicfile

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes b to path with mode perm: a temporary file in the same directory
// (created with the directory if missing), fsync, rename. Concurrent writers of
// one path each use their own temporary file; the last rename wins.
func Write(path string, b []byte, perm os.FileMode) error {
	return WriteFrom(path, bytes.NewReader(b), perm)
}

// WriteFrom is Write with the content read from r to its end, so a large file
// (a binary) is copied without holding it in memory.
func WriteFrom(path string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), perm)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Link makes path a hard link to the file oldname (same file system): a link
// under a temporary name in path's directory, then rename, so path is always
// either what it was or oldname's file.
func Link(oldname, path string) error {
	for range 8 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("link %s: %w", path, err)
		}
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(b[:])+".tmp")
		err := os.Link(oldname, tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			err = os.Rename(tmp, path)
			if err != nil {
				os.Remove(tmp)
			}
		}
		if err != nil {
			return fmt.Errorf("link %s to %s: %w", path, oldname, err)
		}
		return nil
	}
	return fmt.Errorf("link %s: no free temporary name", path)
}

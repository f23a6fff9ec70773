// Package atomicfile writes files so that readers, and a crash, see the old or the
// new content, never a torn one.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write writes b to path with mode perm: a temporary file in the same directory
// (created with the directory if missing), fsync, rename. Concurrent writers of
// one path each use their own temporary file; the last rename wins.
func Write(path string, b []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WriteFunc is Write with the content streamed by write; when write fails,
// path is left as it was.
func WriteFunc(path string, perm os.FileMode, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	err = write(tmp)
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

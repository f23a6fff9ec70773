package file

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/controlplane"
)

// StatePathFor returns where the allocations for the manifests at path are kept:
// DIR/.svcnet-state.json for a directory, DIR/.NAME.svcnet-state.json for a file.
// Dotfiles are never read as manifests, so the state file does not feed itself.
func StatePathFor(path string) string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return filepath.Join(path, ".svcnet-state.json")
	}
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".svcnet-state.json")
}

// ErrStateWrite is wrapped by errors from persisting allocations.
var ErrStateWrite = errors.New("cannot persist allocations")

// readState returns the persisted state, or an empty one when the file does not exist.
func readState(path string) (controlplane.State, error) {
	var st controlplane.State
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("reading state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("reading state %s: %w", path, err)
	}
	return st, nil
}

// writeState writes the state atomically (temp file in the same directory, fsync,
// rename), so a crash leaves either the old or the new file, never a torn one.
func writeState(path string, st controlplane.State) error {
	e := stateEncoder{oneShot: true}
	return e.write(path, st)
}

// write writes st to path as writeState, encoding only what changed since
// e's last write; after a failure, e encodes everything again.
func (e *stateEncoder) write(path string, st controlplane.State) error {
	err := atomicfile.WriteFunc(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		if err := e.encode(bw, st); err != nil {
			return fmt.Errorf("encoding state: %w", err)
		}
		return bw.Flush()
	})
	if err != nil {
		*e = stateEncoder{oneShot: e.oneShot}
		return fmt.Errorf("%w: %w", ErrStateWrite, err)
	}
	return nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// stateMemo is the state file as a Cache's last load read or wrote it: its
// path, its identity then, and its content.
type stateMemo struct {
	path string
	id   fileStat
	st   controlplane.State
}

// readState is the package's readState, from memory when the file is as
// the last load left it.
func (c *Cache) readState(path string) (controlplane.State, error) {
	if !c.keeps() {
		return readState(path)
	}
	if m := c.state; m != nil && m.path == path {
		if id, ok := statFile(path); ok && id == m.id {
			return m.st, nil
		}
	}
	st, err := readState(path)
	if err != nil {
		return st, err
	}
	c.remember(path, st)
	return st, nil
}

// writeState is the package's writeState, which it skips when the file is
// as the last load left it and st holds the same.
func (c *Cache) writeState(path string, st controlplane.State) error {
	if !c.keeps() {
		return writeState(path, st)
	}
	if m := c.state; m != nil && m.path == path && m.st.Equal(st) {
		if id, ok := statFile(path); ok && id == m.id {
			// The next load is given st itself: a controlplane.Reconciler
			// given back the State it returned applies a change as one.
			m.st = st
			return nil
		}
	}
	c.state = nil
	if err := c.enc.write(path, st); err != nil {
		return err
	}
	c.remember(path, st)
	return nil
}

func (c *Cache) remember(path string, st controlplane.State) {
	c.state = nil
	if id, ok := statFile(path); ok {
		c.state = &stateMemo{path: path, id: id, st: st}
	}
}

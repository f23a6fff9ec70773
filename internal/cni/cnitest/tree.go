// Package cnitest holds helpers of the CNI plugin's tests: a snapshot of a
// directory tree, to assert that hostile input created, changed or removed
// nothing in it, and a file's inode, to assert how an install wrote it.
package cnitest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Tree is a snapshot of a directory tree: for each path under the root
// (relative, "." for the root itself), its type, permissions and, for a
// regular file, size, modification time and SHA-256; for a symlink, its
// target. Directories carry no time: their entries are in the tree.
type Tree map[string]string

// Snapshot records the tree under root.
func Snapshot(t testing.TB, root string) Tree {
	t.Helper()
	out := Tree{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += fmt.Sprintf(" %d bytes %s sha256 %s", fi.Size(), fi.ModTime().UTC().Format("15:04:05.000000000"), hex.EncodeToString(sum[:8]))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return out
}

// Diff lists every path created, removed or changed from t to u, sorted.
func (t Tree) Diff(u Tree) []string {
	var out []string
	for p, d := range u {
		if old, ok := t[p]; !ok {
			out = append(out, "created "+p+" ("+d+")")
		} else if old != d {
			out = append(out, "changed "+p+" ("+old+" -> "+d+")")
		}
	}
	for p := range t {
		if _, ok := u[p]; !ok {
			out = append(out, "removed "+p)
		}
	}
	slices.Sort(out)
	return out
}

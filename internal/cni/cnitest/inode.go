package cnitest

import (
	"os"
	"syscall"
	"testing"
)

// Inode returns the inode number of the file path names (following
// symlinks, as os.Stat), to assert that a file was left in place (the same
// inode), replaced by a rename (another), or hard-linked to another path
// (the same as that path's). A stat error fails t.
func Inode(t testing.TB, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

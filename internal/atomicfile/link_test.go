package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLink(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "bin", "a")
	if err := Write(src, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "bin", "b")
	if err := os.WriteFile(dst, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Link(src, dst); err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(src)
	b, err := os.Stat(dst)
	if err != nil || !os.SameFile(a, b) || a.Mode().Perm() != 0o755 {
		t.Fatalf("%s is not a link of %s (mode %v): %v", dst, src, a.Mode(), err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "bin", ".*.tmp"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := Link(filepath.Join(dir, "missing"), dst); err == nil {
		t.Fatal("linking a missing file succeeded")
	}
	if got, _ := os.ReadFile(dst); string(got) != "binary" {
		t.Fatalf("failed Link changed %s to %q", dst, got)
	}
}

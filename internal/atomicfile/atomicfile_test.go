package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "f.json")
	for _, content := range []string{"one", "two"} {
		if err := Write(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "sub", ".*.tmp"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := Write(filepath.Join(p, "under-a-file"), nil, 0o600); err == nil {
		t.Fatal("writing below a regular file succeeded")
	}
}

func TestWriteFromAndLink(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "bin", "a")
	if err := WriteFrom(src, strings.NewReader("binary"), 0o755); err != nil {
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

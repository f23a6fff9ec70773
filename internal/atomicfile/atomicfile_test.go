package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
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

// TestWriteFuncFails: a failing writer leaves the old content and no
// temporary file.
func TestWriteFuncFails(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFunc(p, 0o644, func(w io.Writer) error {
		if _, err := w.Write([]byte("half")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteFunc: %v, want %v", err, boom)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "old" {
		t.Fatalf("read %q, %v; want the old content", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

package image

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeELF writes a minimal x86-64 executable header to p: with one program
// header, PT_INTERP when dynamic (a dynamically linked program's), else
// PT_LOAD.
func writeELF(t *testing.T, p string, dynamic bool) {
	t.Helper()
	var b bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1, Shentsize: 64,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	prog := elf.Prog64{Type: uint32(elf.PT_LOAD)}
	if dynamic {
		prog.Type = uint32(elf.PT_INTERP)
	}
	binary.Write(&b, binary.LittleEndian, hdr)
	binary.Write(&b, binary.LittleEndian, prog)
	if err := os.WriteFile(p, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestSvcnetImage: the svcnet image holds the binary on $PATH and the static
// base's files, runs it as its entrypoint, and refuses a dynamic binary.
func TestSvcnetImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "svcnet")
	writeELF(t, bin, false)
	img, err := Svcnet(bin, SvcnetRepository+":v1.2.3", SvcnetRepository+":latest")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := (&Builder{CacheDir: t.TempDir()}).Build(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(SvcnetRepository + ":latest")
	got, err := tarball.ImageFromPath(tb.Path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{SvcnetBinary}) || !slices.Equal(cfg.Config.Env, []string{"PATH=" + DefaultPath}) {
		t.Errorf("config %+v, want entrypoint %s and PATH", cfg.Config, SvcnetBinary)
	}
	layers, err := got.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, describeTar(t, rc)...)
		rc.Close()
	}
	for _, want := range []string{
		"etc/passwd reg 644 0:0 root:x:0:0:",
		"nobody:x:65534:65534:",
		"etc/group reg 644 0:0 root:x:0:",
		"etc/nsswitch.conf reg 644 0:0 ",
		"hosts: files dns",
		"tmp/ dir 1777 0:0",
		"home/nonroot/ dir 700 65532:65532",
		"usr/local/bin/svcnet reg 755 0:0 \x7fELF",
	} {
		if !slices.ContainsFunc(all, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("no entry with %q in:\n%s", want, strings.Join(all, "\n"))
		}
	}

	dyn := filepath.Join(dir, "dynamic")
	writeELF(t, dyn, true)
	if _, err := Svcnet(dyn, SvcnetRepository+":latest"); err == nil || !strings.Contains(err.Error(), dyn) || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("dynamic binary: %v, want an error naming %s as dynamically linked", err, dyn)
	}
	if _, err := Svcnet(filepath.Join(dir, "missing"), SvcnetRepository+":latest"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing binary: %v, want an error naming it", err)
	}
}

package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// pauseCFlags are upstream's (k8s.io/kubernetes build/pause/Makefile), with
// the version it stamps.
func pauseCFlags(version string) []string {
	return []string{"-Os", "-Wall", "-Werror", "-static", "-DVERSION=v" + version}
}

// pauseBinary compiles upstream's pause.c (build/pause/linux/pause.c of the
// module k8s.io/kubernetes in k8sDir) as upstream does: gcc -static with
// upstream's flags, then strip. The program sleeps until SIGINT or SIGTERM,
// then exits 0, and reaps the zombies it inherits as PID 1. It is cached by
// the source's and flags' hash and gcc's version.
func (b *Builder) pauseBinary(ctx context.Context, cache, k8sDir, version string) (string, error) {
	src := filepath.Join(k8sDir, "build", "pause", "linux", "pause.c")
	code, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("pause: %w", err)
	}
	gccVersion, err := exec.CommandContext(ctx, "gcc", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pause: gcc --version: %w (apt-get install gcc libc6-dev)", err)
	}
	flags := pauseCFlags(version)
	sum := sha256.Sum256(bytes.Join([][]byte{[]byte(formatVersion), code, []byte(strings.Join(flags, " ")), gccVersion}, []byte{0}))
	out := filepath.Join(cache, "bin", "pause-"+hex.EncodeToString(sum[:8]))
	if exists(out) {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	defer os.Remove(tmp)
	for _, argv := range [][]string{
		append(append([]string{"gcc"}, flags...), "-o", tmp, src),
		{"strip", tmp},
	} {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("pause: %s: %w\n%s (static linking needs libc6-dev)", strings.Join(argv, " "), err, strings.TrimSpace(string(b)))
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("pause: %w", err)
	}
	b.logf("compiled %s from %s", out, src)
	return out, nil
}

// Package node is the node tier: real kubelets, containerd and runc on nodes
// made of network namespaces (internal/nodecluster), Pods scheduled, started
// and networked for real, and the cluster's tear-down checked to leave
// nothing behind, also after kill -9.
package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/svcnet/svcnet/internal/image"
	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/testbin"
)

// binDir holds what this test binary builds: svcnet (the CNI plugin).
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "svcnet-node-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var svcnet struct {
	once sync.Once
	path string
	err  error
}

// svcnetBin builds svcnet once per test binary.
func svcnetBin(t *testing.T) string {
	t.Helper()
	svcnet.once.Do(func() {
		svcnet.path = filepath.Join(binDir, "svcnet")
		svcnet.err = testbin.Build(svcnet.path)
	})
	if svcnet.err != nil {
		t.Fatal(svcnet.err)
	}
	return svcnet.path
}

// pauseSource is the sandbox's program: it sleeps until it is told to stop.
const pauseSource = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

var pause struct {
	once sync.Once
	path string
	err  error
}

// pauseImage builds the sandbox image nodecluster.DefaultPauseImage once per
// test binary.
func pauseImage(t *testing.T) string {
	t.Helper()
	pause.once.Do(func() {
		src := filepath.Join(binDir, "pause")
		if pause.err = os.MkdirAll(src, 0o755); pause.err != nil {
			return
		}
		for name, content := range map[string]string{"go.mod": "module pause\n\ngo 1.22\n", "main.go": pauseSource} {
			if pause.err = os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); pause.err != nil {
				return
			}
		}
		bin := filepath.Join(src, "pause.bin")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			pause.err = fmt.Errorf("build pause: %w: %s", err, strings.TrimSpace(string(out)))
			return
		}
		var tb image.Tarball
		tb, pause.err = (&image.Builder{}).Build(context.Background(), image.Image{
			Refs:   []string{nodecluster.DefaultPauseImage},
			Layers: []image.Layer{{Description: "pause", Files: []image.File{{Path: "/pause", Mode: 0o755, Source: bin}}}},
			Config: image.Config{Entrypoint: []string{"/pause"}},
		})
		pause.path = tb.Path
	})
	if pause.err != nil {
		t.Fatal(pause.err)
	}
	return pause.path
}

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
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
	"github.com/svcnet/svcnet/internal/testbin"
)

// binDir holds what this test binary builds: svcnet (the CNI plugin).
var binDir string

func TestMain(m *testing.M) {
	if spec := os.Getenv(envHelper); spec != "" {
		if err := runKilledHelper(spec); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
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

var images struct {
	once           sync.Once
	pause, agnhost string
	err            error
}

// agnhostImage is the reference of the agnhost image the tests run.
const agnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.63.0"

// testImages builds, once per test binary, the sandbox image
// (nodecluster.DefaultPauseImage: a program that sleeps until told to stop)
// and agnhostImage (agnhost from tools/k8s at /agnhost, its entrypoint as
// upstream's), and returns their tarballs.
func testImages(t *testing.T) (pause, agnhost string) {
	t.Helper()
	_, k8sBin, _ := nodetest.Binaries(t)
	if _, err := os.Stat(filepath.Join(k8sBin, "agnhost")); err != nil {
		t.Fatalf("agnhost: %v (tools/k8s/build.sh agnhost)", err)
	}
	images.once.Do(func() {
		images.pause, images.agnhost, images.err = buildImages(filepath.Join(k8sBin, "agnhost"))
	})
	if images.err != nil {
		t.Fatal(images.err)
	}
	return images.pause, images.agnhost
}

func buildImages(agnhostBin string) (pause, agnhost string, err error) {
	src := filepath.Join(binDir, "pause")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", err
	}
	for name, content := range map[string]string{"go.mod": "module pause\n\ngo 1.22\n", "main.go": pauseSource} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			return "", "", err
		}
	}
	bin := filepath.Join(src, "pause.bin")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build pause: %w: %s", err, strings.TrimSpace(string(out)))
	}
	b := &image.Builder{}
	ctx := context.Background()
	p, err := b.Build(ctx, image.Image{
		Refs:   []string{nodecluster.DefaultPauseImage},
		Layers: []image.Layer{{Description: "pause", Files: []image.File{{Path: "/pause", Mode: 0o755, Source: bin}}}},
		Config: image.Config{Entrypoint: []string{"/pause"}},
	})
	if err != nil {
		return "", "", err
	}
	a, err := b.Build(ctx, image.Image{
		Refs:   []string{agnhostImage},
		Layers: []image.Layer{{Description: "agnhost", Files: []image.File{{Path: "/agnhost", Mode: 0o755, Source: agnhostBin}}}},
		Config: image.Config{Entrypoint: []string{"/agnhost"}},
	})
	if err != nil {
		return "", "", err
	}
	return p.Path, a.Path, nil
}

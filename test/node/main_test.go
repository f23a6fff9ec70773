// Package node is the node tier: real kubelets, containerd and runc on nodes
// made of network namespaces (internal/nodecluster), Pods scheduled, started
// and networked for real, and the cluster's tear-down checked to leave
// nothing behind, also after kill -9.
package node

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/svcnet/svcnet/internal/image"
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

// agnhostImage is the reference of the agnhost image the tests run.
const agnhostImage = image.AgnhostImage

// testImages returns the archives of the sandbox image (image.PauseImage, also
// nodecluster.DefaultPauseImage) and of agnhost, from the node tier's test
// images (nodetest.Images).
func testImages(t *testing.T) (pause, agnhost string) {
	t.Helper()
	return nodetest.Image(t, image.PauseImage), nodetest.Image(t, image.AgnhostImage)
}

package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

// A kubelet that cannot start fails Up, within its bounds, with the kubelet's
// log in the error, and Up leaves nothing behind.
func TestUpFailsCleanly(t *testing.T) {
	etcd, k8sBin, containerdBin := nodetest.Binaries(t)
	pause, _ := testImages(t)
	bins := t.TempDir()
	for _, b := range nodetest.K8sCommands {
		if b == "kubelet" {
			continue
		}
		if err := os.Symlink(filepath.Join(k8sBin, b), filepath.Join(bins, b)); err != nil {
			t.Fatal(err)
		}
	}
	broken := "#!/bin/sh\necho 'kubelet: this kubelet is broken on purpose' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bins, "kubelet"), []byte(broken), 0o755); err != nil {
		t.Fatal(err)
	}
	o := nodecluster.Options{
		Name: nodetest.Name(), Dir: filepath.Join(t.TempDir(), "cluster"), Nodes: 2,
		K8sBin: bins, EtcdBin: etcd, ContainerdBin: containerdBin,
		CNIPlugin: svcnetBin(t), Images: []string{pause}, ReadyTimeout: time.Minute,
	}
	t.Cleanup(func() { _ = nodecluster.Down(o.Name, o.Dir) })
	before := hostState(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := nodecluster.Up(ctx, o)
	if err == nil {
		_ = c.Down()
		t.Fatal("Up with a broken kubelet succeeded")
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	t.Logf("Up failed in %v: %s", time.Since(start).Round(100*time.Millisecond), first)
	for _, want := range []string{"kubelet", "broken on purpose", "exit status 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Up's error lacks %q:\n%v", want, err)
		}
	}
	nodetest.CheckGone(t, o.Name, o.Dir, "a failed Up")
	checkHostState(t, before)
}

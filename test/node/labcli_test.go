package node

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

// `svcnet lab up --kubelet` leaves a cluster of real nodes running after it
// exits (detached); it is found again (Attach) with its nodes Ready, and
// `svcnet lab down` removes all of it.
func TestLabUpKubelet(t *testing.T) {
	_, k8sBin, containerdBin := nodetest.Binaries(t)
	pause, _ := testImages(t)
	svcnet := svcnetBin(t)
	name := nodetest.Name()
	dir := "/var/tmp/svcnet-lab." + name
	t.Cleanup(func() {
		_ = nodecluster.Down(name, dir)
		// lab up --kubelet and lab down take the lab's lock file, as for every lab.
		_ = os.Remove("/run/svcnet/lab/" + name + ".lock")
	})
	before := hostState(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	up := exec.CommandContext(ctx, svcnet, "lab", "up", "--kubelet", "--name", name, "--nodes", "2",
		"--k8s-bin", k8sBin, "--containerd-bin", containerdBin, "--image", pause)
	out, err := up.CombinedOutput()
	if err != nil {
		t.Fatalf("lab up --kubelet: %v\n%s", err, out)
	}
	t.Logf("lab up --kubelet:\n%s", out)
	for _, want := range []string{"2 nodes Ready", "kubeconfig: " + dir + "/control-plane/kubeconfig", "svcnet lab down --name " + name} {
		if !strings.Contains(string(out), want) {
			t.Errorf("lab up's output lacks %q", want)
		}
	}

	c, err := nodecluster.Attach(ctx, dir, time.Minute)
	if err != nil {
		t.Fatalf("the cluster is not running after lab up exited: %v", err)
	}
	if err := c.WaitReady(ctx, time.Minute); err != nil {
		t.Error(err)
	}
	c.Close()
	pids, err := nodecluster.Pids(name)
	if err != nil || len(pids) == 0 {
		t.Fatalf("no process of the cluster (%v)", err)
	}

	down := exec.CommandContext(ctx, svcnet, "lab", "down", "--name", name)
	if out, err := down.CombinedOutput(); err != nil {
		t.Fatalf("lab down: %v\n%s", err, out)
	}
	checkClusterGone(t, name, dir, pids, "lab down")
	checkHostState(t, before)
}

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// labPids returns the processes living in the lab's namespaces.
func labPids(t *testing.T, name string) []int {
	t.Helper()
	all, err := netns.Names()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, ns := range all {
		if strings.HasPrefix(ns, name+".") {
			p, err := netns.PidsIn(netns.RunDir + "/" + ns)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, p...)
		}
	}
	return pids
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z")
}

// checkLabGone fails t for every namespace of lab name and every process of
// pids (the lab's, found before `down`) that is left, and for its cgroup.
func checkLabGone(t *testing.T, name string, pids []int) {
	t.Helper()
	all, err := netns.Names()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range all {
		if strings.HasPrefix(ns, name+".") {
			t.Errorf("namespace %s left after lab down", ns)
		}
	}
	for _, p := range pids {
		if running(p) {
			t.Errorf("process %d of the lab still runs after lab down", p)
		}
	}
	if root, err := cgroup.Root(); err == nil {
		dir, err := topology.Names{Lab: name}.Cgroup(root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left after lab down (stat: %v)", dir, err)
		}
	}
}

// The demo killed with kill -9 half way, then `svcnet lab down`: no lab namespace,
// no lab process, no lab file is left, and the host's addresses, routes, rules and
// nftables ruleset are as they were before.
func TestDownAfterKilledDemo(t *testing.T) {
	netnstest.RequireRoot(t)
	name := fmt.Sprintf("kill%d", os.Getpid()%100000)
	t.Cleanup(func() { _ = lab.Down(name) })
	before := netnstest.HostNetworkState(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	demo := exec.CommandContext(ctx, svcnetBin, "demo", "--name", name, "-f", "../../examples/packet-path/my-nginx.yaml")
	out, err := demo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once the pods run and traffic flows: mid-demo, with everything up.
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "From the external client") {
			_ = demo.Process.Kill()
			killed = true
			break
		}
	}
	_ = demo.Wait()
	if !killed {
		t.Fatal("the demo ended before reaching its NodePort step")
	}
	pids := labPids(t, name)
	if len(pids) == 0 {
		t.Fatal("no lab process found after kill -9: the demo did not get far enough to test down")
	}

	if out, err := exec.Command(svcnetBin, "lab", "down", "--name", name).CombinedOutput(); err != nil {
		t.Fatalf("lab down: %v: %s", err, out)
	}
	checkLabGone(t, name, pids)
	for _, path := range []string{topology.Names{Lab: name}.Dir()} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s left after lab down", path)
		}
	}
	if after := netnstest.HostNetworkState(t); after != before {
		t.Errorf("the host's network state changed:\n--- before\n%s\n--- after\n%s", before, after)
	}
	// Idempotent.
	if out, err := exec.Command(svcnetBin, "lab", "down", "--name", name).CombinedOutput(); err != nil {
		t.Fatalf("second lab down: %v: %s", err, out)
	}
}

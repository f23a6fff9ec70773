package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// badPools is what a user applies over the lab's pool (172.26.236.180-199): a
// pool that overlaps it, named to sort before it, a pool holding node3's
// InternalIP, and a good LoadBalancer Service.
const badPools = `apiVersion: svcnet.io/v1alpha1
kind: IPAddressPool
metadata: {name: a-overlap}
spec:
  addresses: ["172.26.236.185-172.26.236.190"]
---
apiVersion: svcnet.io/v1alpha1
kind: IPAddressPool
metadata: {name: b-nodes}
spec:
  addresses: ["172.26.236.179/32"]
---
apiVersion: v1
kind: Service
metadata: {name: after-bad-pools}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
`

const (
	overlapText = "spec.addresses[0]: 172.26.236.185-172.26.236.190 overlaps IPAddressPool lab (172.26.236.180-172.26.236.199)"
	nodeText    = "spec.addresses[0]: holds Node node3's InternalIP 172.26.236.179"
)

// pools returns the lab's pools by name, as `lab get ipaddresspools` lists them.
func (e *env) pools() map[string]*pool.IPAddressPool {
	e.t.Helper()
	r, err := e.l.Get(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*pool.IPAddressPool{}
	for _, p := range r.Pools {
		out[p.Name] = p
	}
	return out
}

// labCLI runs `svcnet lab ARGS --name LAB` with the lab's lock released, and
// returns stdout, stderr and the exit code.
func (e *env) labCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	name, reopen := e.release(t)
	defer reopen()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(e.ctx, svcnetBin, append([]string{"lab"}, append(args, "--name", name)...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	t.Fatalf("svcnet lab %v: %v", args, err)
	return "", "", -1
}

// poolScenarios: a bad IPAddressPool never breaks a good one. The file-mode
// lab refuses, at `lab apply`, a pool overlapping the lab's (though its name
// sorts first) and one holding node3's InternalIP, naming both pools and the
// overlap or the node, exits 1 and applies the rest; a refused edit leaves
// the pool as it was. The kube lab's controller refuses them in the pools'
// status. Either way the lab's pool keeps serving web-lb's LoadBalancer IP.
func poolScenarios(t *testing.T, e *env) {
	ip := e.lbIP("web-lb")
	url := fmt.Sprintf("http://%s:80/", ip)
	manifest := filepath.Join(t.TempDir(), "bad-pools.yaml")
	if err := os.WriteFile(manifest, []byte(badPools), 0o644); err != nil {
		t.Fatal(err)
	}
	file := e.l.Info().ControlPlane != cluster.ControlPlaneKube
	t.Cleanup(func() {
		if !file { // the file-mode lab refused them: they do not exist
			for _, name := range []string{"a-overlap", "b-nodes"} {
				if err := e.l.Delete(e.ctx, pool.Kind, "", name, 0); err != nil {
					t.Errorf("delete IPAddressPool %s: %v", name, err)
				}
			}
		}
		if err := e.l.Delete(e.ctx, "Service", "default", "after-bad-pools", 0); err != nil {
			t.Errorf("delete Service after-bad-pools: %v", err)
		}
	})

	stdout, stderr, code := e.labCLI(t, "apply", "-f", manifest)
	if file {
		if code != 1 {
			t.Fatalf("lab apply: exit %d, want 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		for _, want := range []string{"IPAddressPool a-overlap: " + overlapText, "IPAddressPool b-nodes: " + nodeText,
			"1 object(s) applied, 2 rejected"} {
			if !strings.Contains(stdout+stderr, want) {
				t.Errorf("lab apply output lacks %q\nstdout: %s\nstderr: %s", want, stdout, stderr)
			}
		}
		got := e.pools()
		if got["a-overlap"] != nil || got["b-nodes"] != nil || got[lab.PoolName] == nil {
			t.Errorf("pools after the refusal: %v, want neither a-overlap nor b-nodes, and %s", slices.Sorted(maps.Keys(got)), lab.PoolName)
		}
	} else {
		if code != 0 {
			t.Fatalf("lab apply (kube: no admission webhook): exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		e.waitPoolRefused("a-overlap", pool.ReasonOverlap, overlapText)
		e.waitPoolRefused("b-nodes", pool.ReasonReservedAddresses, nodeText)
	}

	// The Service applied beside the bad pools got an address of the lab's pool.
	other := e.lbIP("after-bad-pools")
	if !lab.InPool(other) || other == ip {
		t.Errorf("after-bad-pools got %s; want a free address of %s", other, lab.PoolRange)
	}
	if now := e.lbIP("web-lb"); now != ip {
		t.Fatalf("web-lb moved from %s to %s", ip, now)
	}
	e.eventually("web-lb's LB IP answers", func() error { return e.curl("client", url, 1, time.Second)[0].Err })
	pods, _ := answered(t, "client", e.curl("client", url, 10, 2*time.Second))
	if err := onlyKeys(pods, "web-1", "web-2", "web-3"); err != nil {
		t.Fatal(err)
	}
	if owner, err := e.l.Announcer(ip); err != nil {
		t.Errorf("nobody announces %s: %v", ip, err)
	} else {
		t.Logf("%s still announced by node%d", ip, owner)
	}

	if !file {
		return
	}
	// An edit that would overlap the lab's pool is refused; the pool keeps its
	// addresses.
	spare := &pool.IPAddressPool{TypeMeta: metav1.TypeMeta{APIVersion: pool.SchemeGroupVersion.String(), Kind: pool.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "spare"}, Spec: pool.IPAddressPoolSpec{Addresses: []string{"172.26.236.200-172.26.236.201"}}}
	e.applyObjects(controlplane.Object{Origin: "lbpools_test", Obj: spare})
	t.Cleanup(func() {
		if err := e.l.Delete(e.ctx, pool.Kind, "", "spare", 0); err != nil {
			t.Errorf("delete IPAddressPool spare: %v", err)
		}
	})
	edited := spare.DeepCopy()
	edited.Spec.Addresses = []string{"172.26.236.199-172.26.236.201"}
	errs := e.l.Apply(e.ctx, []controlplane.Object{{Origin: "lbpools_test", Obj: edited}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "IPAddressPool spare: spec.addresses[0]: 172.26.236.199 overlaps IPAddressPool lab (172.26.236.180-172.26.236.199)") {
		t.Fatalf("edit of spare: errors %v, want its overlap with lab", errs)
	}
	if got := e.pools()["spare"]; got == nil || !slices.Equal(got.Spec.Addresses, spare.Spec.Addresses) {
		t.Errorf("spare after the refused edit: %v, want its previous addresses %v", got, spare.Spec.Addresses)
	}
}

// waitPoolRefused waits (kube lab) for pool name's condition Accepted False
// with reason and a message containing text.
func (e *env) waitPoolRefused(name, reason, text string) {
	e.t.Helper()
	e.eventually("IPAddressPool "+name+" refused", func() error {
		p := e.pools()[name]
		if p == nil || p.Status == nil {
			return fmt.Errorf("no status yet")
		}
		for _, c := range p.Status.Conditions {
			if c.Type == pool.ConditionAccepted {
				if c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, text) {
					return fmt.Errorf("Accepted %s %s: %s", c.Status, c.Reason, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("no condition Accepted")
	})
}

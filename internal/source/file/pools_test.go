package file

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

const labPool = `apiVersion: svcnet.io/v1alpha1
kind: IPAddressPool
metadata: {name: lab}
spec:
  addresses: ["172.26.236.180-172.26.236.199"]
`

const webLB = `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 80}]
`

// "a" sorts before "lab": name order would have dropped lab.
const overlapping = `apiVersion: svcnet.io/v1alpha1
kind: IPAddressPool
metadata: {name: a}
spec:
  addresses: ["172.26.236.190-172.26.236.195"]
`

// The acceptance of pools is in the state file: loads at any later time, by
// any process, refuse the pool applied second and keep the first pool's
// allocations, naming the refused pool's own file.
func TestPoolAdmissionPersists(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "pool.yaml"), labPool)
	writeFile(t, filepath.Join(dir, "web.yaml"), webLB)
	l, err := Load(Options{Path: dir, Now: testNow})
	if err != nil || len(l.Errors) != 0 {
		t.Fatalf("first load: %v %v", err, l.Errors)
	}
	ip := lbIP(t, l, "web")
	if ip != "172.26.236.180" {
		t.Fatalf("web: %s, want 172.26.236.180", ip)
	}
	writeFile(t, filepath.Join(dir, "a.yaml"), overlapping)
	for i, at := range []time.Duration{time.Second, time.Hour, 24 * time.Hour} {
		now := func() time.Time { return testNow().Add(at) }
		l, err := Load(Options{Path: dir, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Errors) != 1 {
			t.Fatalf("load %d: errors %v, want a's", i, l.Errors)
		}
		want := filepath.Join(dir, "a.yaml") + "#1: IPAddressPool a: spec.addresses[0]: 172.26.236.190-172.26.236.195 overlaps IPAddressPool lab (172.26.236.180-172.26.236.199)"
		if got := l.Errors[0].Error(); got != want || !errors.Is(l.Errors[0], pool.ErrOverlap) {
			t.Errorf("load %d: error %q, want %q wrapping ErrOverlap", i, got, want)
		}
		if got := lbIP(t, l, "web"); got != ip {
			t.Errorf("load %d: web moved to %s", i, got)
		}
	}
	b, err := os.ReadFile(StatePathFor(dir))
	if err != nil {
		t.Fatal(err)
	}
	var st controlplane.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(st.Pools["lab"], ","); got != "172.26.236.180-172.26.236.199" || len(st.Pools) != 1 {
		t.Errorf("state pools %v, want lab only", st.Pools)
	}
}

func lbIP(t *testing.T, l *Loaded, name string) string {
	t.Helper()
	for _, s := range l.API.Services {
		if s.Name == name {
			if len(s.Status.LoadBalancer.Ingress) == 0 {
				return ""
			}
			return s.Status.LoadBalancer.Ingress[0].IP
		}
	}
	t.Fatalf("Service %s not loaded", name)
	return ""
}

package cni_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// The svcnet binary run as "loopback" by libcni is the loopback plugin: ADD
// brings the pod's lo up and reports it, CHECK passes, DEL sets it down, a
// second DEL and one for a namespace that is gone succeed.
func TestCnitoolLoopback(t *testing.T) {
	e := newEnv(t, podCIDR4)
	conf := `{"cniVersion":"1.0.0","name":"cni-loopback","plugins":[{"type":"loopback"}]}`
	if err := os.WriteFile(filepath.Join(e.netDir, "99-loopback.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := netnstest.New(t, "cnitlo")
	sh(t, pod, "ip", "link", "set", "lo", "down")

	out, err := e.cnitoolNet("add", "cni-loopback", pod, "")
	if err != nil {
		t.Fatal(err)
	}
	if lo := sh(t, pod, "ip", "link", "show", "lo"); !strings.Contains(lo, ",UP") {
		t.Fatalf("lo not up after ADD: %s", lo)
	}
	var head struct {
		CNIVersion string `json:"cniVersion"`
	}
	r, err := types100.NewResult([]byte(out))
	if json.Unmarshal([]byte(out), &head) != nil || head.CNIVersion != "1.0.0" || err != nil {
		t.Fatalf("result %s: %v; want a 1.0.0 result", out, err)
	}
	res := r.(*types100.Result)
	if len(res.Interfaces) != 1 || res.Interfaces[0].Name != "lo" || res.Interfaces[0].Sandbox != pod.Path() || len(res.IPs) != 2 {
		t.Errorf("result %s", out)
	}
	if _, err := e.cnitoolNet("check", "cni-loopback", pod, ""); err != nil {
		t.Errorf("check: %v", err)
	}
	for i := range 2 {
		if _, err := e.cnitoolNet("del", "cni-loopback", pod, ""); err != nil {
			t.Fatalf("del %d: %v", i+1, err)
		}
	}
	if lo := sh(t, pod, "ip", "link", "show", "lo"); strings.Contains(lo, ",UP") {
		t.Errorf("lo still up after DEL: %s", lo)
	}
	if _, err := e.cnitoolNet("check", "cni-loopback", pod, ""); err == nil || !strings.Contains(err.Error(), "loopback interface is down") {
		t.Errorf("check with lo down: %v", err)
	}
}

// A 1.0.0 conflist (what `svcnet cni install` writes for containerd 1.x):
// the plugin answers ADD with a 1.0.0 result, and CHECK and DEL work.
func TestCnitoolVersion100(t *testing.T) {
	e := newEnvVersion(t, "1.0.0", podCIDR4, podCIDR6)
	pod := netnstest.New(t, "cnitpod")
	out, err := e.cnitool("add", pod, "")
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal([]byte(out), &head); err != nil || head.CNIVersion != "1.0.0" {
		t.Fatalf("result %s: %v; want cniVersion 1.0.0", out, err)
	}
	r, err := types100.NewResult([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := podIP(t, r.(*types100.Result), false).String(); got != "192.168.1.2" {
		t.Errorf("pod address %s", got)
	}
	if _, err := e.cnitool("check", pod, ""); err != nil {
		t.Errorf("check: %v", err)
	}
	if _, err := e.cnitool("del", pod, ""); err != nil {
		t.Errorf("del: %v", err)
	}
	if got := e.allocations(); len(got) != 0 {
		t.Errorf("addresses left after DEL: %v", got)
	}
}

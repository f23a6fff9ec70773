package cni_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

const capHostPort = `{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}`

// The whole life of two pods through cnitool: ADD (with a hostPort), CHECK,
// STATUS, pod-to-pod and outside-to-hostPort traffic, DEL (twice), after
// which nothing answers and nothing is left.
func TestCnitoolLifecycle(t *testing.T) {
	e := newEnv(t, podCIDR4, podCIDR6)
	out := e.newOutside()
	a, b := netnstest.New(t, "cnitpod"), netnstest.New(t, "cnitpod")
	ra := e.add(a, capHostPort)
	rb := e.add(b, "")
	if got := podIP(t, ra, false).String(); got != "192.168.1.2" {
		t.Errorf("pod a got %s", got)
	}
	if got := podIP(t, rb, true).String(); got != "fd00:192:168:1::3" {
		t.Errorf("pod b got %s", got)
	}
	if ra.Interfaces[1].Name != cni.HostVethName(containerID(a), "eth0") {
		t.Errorf("node end %q, want the name derived from cnitool's container ID", ra.Interfaces[1].Name)
	}
	for _, p := range []struct {
		name string
		cap  string
	}{{"a", capHostPort}, {"b", ""}} {
		ns := a
		if p.name == "b" {
			ns = b
		}
		if _, err := e.cnitool("check", ns, p.cap); err != nil {
			t.Errorf("check pod %s: %v", p.name, err)
		}
	}
	if _, err := e.cnitool("status", nil, ""); err != nil {
		t.Errorf("status: %v", err)
	}

	serveWho(t, a, 80)
	if who, err := askTCP(b, podIP(t, ra, false).String()+":80"); err != nil || who != podIP(t, rb, false).String() {
		t.Errorf("pod b -> pod a: %q, %v", who, err)
	}
	if who, err := askTCP(b, fmt.Sprintf("[%s]:80", podIP(t, ra, true))); err != nil || who != podIP(t, rb, true).String() {
		t.Errorf("pod b -> pod a over IPv6: %q, %v", who, err)
	}
	if who, err := askTCP(out, node4+":8080"); err != nil || who != outside4 {
		t.Errorf("outside -> hostPort: %q, %v", who, err)
	}
	if who, err := askTCP(a, node4+":8080"); err != nil || who != "192.168.1.1" {
		t.Errorf("hairpin: %q, %v", who, err)
	}

	for range 2 {
		if _, err := e.cnitool("del", a, capHostPort); err != nil {
			t.Fatalf("del pod a: %v", err)
		}
	}
	if who, err := askTCP(out, node4+":8080"); err == nil {
		t.Errorf("hostPort answers after DEL (%q)", who)
	}
	if tables := sh(t, e.node, "nft", "list", "ruleset"); strings.Contains(tables, containerID(a)[:12]) || strings.Contains(tables, "8080") {
		t.Errorf("ruleset after DEL still mentions pod a:\n%s", tables)
	}
	if _, err := e.cnitool("del", b, ""); err != nil {
		t.Fatalf("del pod b: %v", err)
	}
	if got := e.allocations(); len(got) != 0 {
		t.Errorf("allocations after DEL: %v", got)
	}
	if veths := sh(t, e.node, "ip", "-o", "link", "show", "type", "veth"); strings.Contains(veths, "veth") {
		t.Errorf("veths after DEL:\n%s", veths)
	}
}

// cnitool gc: attachments the runtime still knows are DELeted by libcni; an
// attachment it lost track of (its cache entry gone) is freed by the
// plugin's own GC: address, veth and hostPort rules.
func TestCnitoolGC(t *testing.T) {
	e := newEnv(t, podCIDR4)
	known, lost := netnstest.New(t, "cnitpod"), netnstest.New(t, "cnitpod")
	e.add(known, "")
	e.add(lost, capHostPort)
	if err := os.Remove(e.cachedResult(lost)); err != nil {
		t.Fatalf("forgetting the attachment: %v", err)
	}
	if _, err := e.cnitool("gc", nil, ""); err != nil {
		t.Fatalf("gc: %v", err)
	}
	if got := e.allocations(); len(got) != 0 {
		t.Errorf("allocations after gc: %v", got)
	}
	if veths := sh(t, e.node, "ip", "-o", "link", "show", "type", "veth"); strings.Contains(veths, "veth") {
		t.Errorf("veths after gc:\n%s", veths)
	}
	if tables := sh(t, e.node, "nft", "list", "ruleset"); strings.Contains(tables, "8080") {
		t.Errorf("hostPort rules after gc:\n%s", tables)
	}
}

// STATUS reports a full subnet (exit status and message), ADD into it fails
// clearly, and a DEL makes room.
func TestCnitoolStatusAndExhaustion(t *testing.T) {
	e := newEnv(t, "192.168.1.0/30") // one usable address: .2
	p1, p2 := netnstest.New(t, "cnitpod"), netnstest.New(t, "cnitpod")
	e.add(p1, "")
	_, err := e.cnitool("status", nil, "")
	if err == nil || !strings.Contains(err.Error(), "no free address") || !strings.Contains(err.Error(), "192.168.1.0/30") {
		t.Fatalf("status of a full network: %v", err)
	}
	_, err = e.cnitool("add", p2, "")
	if err == nil || !strings.Contains(err.Error(), "interface eth0: no free address") {
		t.Fatalf("add into a full network: %v", err)
	}
	if _, err := e.cnitool("del", p1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cnitool("status", nil, ""); err != nil {
		t.Fatalf("status after del: %v", err)
	}
	if r := e.add(p2, ""); podIP(t, r, false).String() != "192.168.1.2" {
		t.Fatalf("add after del: %v", r.IPs)
	}
}

// cnitool check fails, naming the problem, when the pod's address is gone.
func TestCnitoolCheckDetectsDrift(t *testing.T) {
	e := newEnv(t, podCIDR4)
	p := netnstest.New(t, "cnitpod")
	e.add(p, capHostPort)
	sh(t, p, "ip", "addr", "flush", "dev", "eth0")
	_, err := e.cnitool("check", p, capHostPort)
	if err == nil || !strings.Contains(err.Error(), "address 192.168.1.2/32 is missing from pod interface eth0") {
		t.Fatalf("check after drift: %v", err)
	}
	// The hostPort rules are part of CHECK too.
	sh(t, p, "ip", "addr", "add", "192.168.1.2/32", "dev", "eth0")
	sh(t, e.node, "nft", "flush", "map", "ip", "svcnet-hostport", "hostports")
	_, err = e.cnitool("check", p, capHostPort)
	if err == nil || !strings.Contains(err.Error(), "map hostports lacks tcp . 8080") {
		t.Fatalf("check after hostport drift: %v", err)
	}
}

// The installed plugin answers VERSION as a runtime invokes it: through the
// symlink, no arguments, CNI_COMMAND in the environment.
func TestPluginVersion(t *testing.T) {
	needTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, cniPath+"/svcnet")
	c.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
	c.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("VERSION: %v", err)
	}
	if want := `{"cniVersion":"1.1.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}`; strings.TrimSpace(string(out)) != want {
		t.Fatalf("VERSION printed %s, want %s", out, want)
	}
}

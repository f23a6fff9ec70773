package cni_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func TestIsLoopbackName(t *testing.T) {
	for argv0, want := range map[string]bool{
		"loopback": true, "/opt/cni/bin/loopback": true, "./loopback": true,
		"svcnet": false, "/opt/cni/bin/svcnet": false, "loopback.old": false, "/opt/loopback/svcnet": false, "": false,
	} {
		if got := cni.IsLoopbackName(argv0); got != want {
			t.Errorf("IsLoopbackName(%q) = %v, want %v", argv0, got, want)
		}
	}
}

// runLoopback runs one command of the loopback plugin.
func runLoopback(cmd, netnsPath, conf string) (string, error) {
	var out bytes.Buffer
	l := &cni.Loopback{Stdout: &out}
	args := &skel.CmdArgs{ContainerID: "ctr1", Netns: netnsPath, IfName: "eth0", StdinData: []byte(conf)}
	var err error
	switch cmd {
	case "ADD":
		err = l.Add(args)
	case "DEL":
		err = l.Del(args)
	case "CHECK":
		err = l.Check(args)
	}
	return out.String(), err
}

const loConf = `{"cniVersion":"1.0.0","name":"cni-loopback","type":"loopback"}`

// The reference loopback plugin's life on a namespace whose lo is down (as a
// runtime makes it): CHECK fails, ADD brings lo up and reports it with its addresses in
// the configuration's version, CHECK passes, DEL sets lo down, DEL of a
// namespace that is gone succeeds.
func TestLoopbackLifecycle(t *testing.T) {
	pod := netnstest.New(t, "lopod")
	sh(t, pod, "ip", "link", "set", "lo", "down")
	if _, err := runLoopback("CHECK", pod.Path(), loConf); cniCode(err) != cni.ErrCheckFailed || !strings.Contains(err.Error(), "loopback interface is down") {
		t.Fatalf("CHECK of a fresh namespace: %v, want code %d", err, cni.ErrCheckFailed)
	}
	out, err := runLoopback("ADD", pod.Path(), loConf)
	if err != nil {
		t.Fatal(err)
	}
	if lo := sh(t, pod, "ip", "link", "show", "lo"); !strings.Contains(lo, ",UP") {
		t.Fatalf("lo not up after ADD: %s", lo)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil || raw["cniVersion"] != "1.0.0" {
		t.Fatalf("result %s: %v, want cniVersion 1.0.0", out, err)
	}
	r, err := types100.NewResult([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	res := r.(*types100.Result)
	if len(res.Interfaces) != 1 || res.Interfaces[0].Name != "lo" || res.Interfaces[0].Mac != "00:00:00:00:00:00" || res.Interfaces[0].Sandbox != pod.Path() {
		t.Errorf("interfaces %+v", res.Interfaces)
	}
	var ips []string
	for _, ip := range res.IPs {
		ips = append(ips, ip.Address.String())
		if ip.Interface == nil || *ip.Interface != 0 {
			t.Errorf("ip %s: interface %v, want 0", ip.Address.String(), ip.Interface)
		}
	}
	if strings.Join(ips, " ") != "127.0.0.1/8 ::1/128" {
		t.Errorf("ips %v, want 127.0.0.1/8 ::1/128", ips)
	}
	if _, err := runLoopback("CHECK", pod.Path(), loConf); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}

	// A prevResult is passed through, in the configuration's version.
	prev := `{"cniVersion":"0.4.0","name":"n","type":"loopback","prevResult":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"192.168.1.2/32"}]}}`
	out, err = runLoopback("ADD", pod.Path(), prev)
	var passed struct {
		CNIVersion string `json:"cniVersion"`
		IPs        []struct {
			Address string `json:"address"`
		} `json:"ips"`
		Interfaces []any `json:"interfaces"`
	}
	if err != nil || json.Unmarshal([]byte(out), &passed) != nil || passed.CNIVersion != "0.4.0" ||
		len(passed.IPs) != 1 || passed.IPs[0].Address != "192.168.1.2/32" || len(passed.Interfaces) != 0 {
		t.Errorf("ADD with prevResult: %s, %v; want the prevResult unchanged", out, err)
	}

	if _, err := runLoopback("DEL", pod.Path(), loConf); err != nil {
		t.Fatal(err)
	}
	if lo := sh(t, pod, "ip", "link", "show", "lo"); strings.Contains(lo, ",UP") {
		t.Errorf("lo still up after DEL: %s", lo)
	}
	path := pod.Path()
	if err := pod.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := runLoopback("DEL", path, loConf); err != nil {
		t.Errorf("DEL of a namespace that is gone: %v", err)
	}
	if _, err := runLoopback("DEL", "", loConf); err != nil {
		t.Errorf("DEL without CNI_NETNS: %v", err)
	}
}

// What is not a network namespace is refused before anything opens it;
// DEL takes a regular file or nothing as a namespace that is gone.
func TestLoopbackRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd, netns string
		code       uint
	}{
		{"ADD", file, types.ErrInvalidNetNS},
		{"CHECK", file, types.ErrInvalidNetNS},
		{"ADD", fifo, types.ErrInvalidNetNS},
		{"DEL", fifo, types.ErrInvalidNetNS},
		{"DEL", file, 0},
		{"DEL", filepath.Join(dir, "gone"), 0},
		{"ADD", "relative/ns", types.ErrInvalidEnvironmentVariables},
		{"ADD", dir + "/../x", types.ErrInvalidEnvironmentVariables},
		{"ADD", "", types.ErrInvalidEnvironmentVariables},
	} {
		_, err := runLoopback(tc.cmd, tc.netns, loConf)
		if cniCode(err) != tc.code || (tc.code == 0) != (err == nil) {
			t.Errorf("%s %q: %v (code %d), want code %d", tc.cmd, tc.netns, err, cniCode(err), tc.code)
		}
	}
	if _, err := runLoopback("ADD", file, `{"cniVersion":`); cniCode(err) != types.ErrDecodingFailure {
		t.Errorf("bad JSON: %v, want code %d", err, types.ErrDecodingFailure)
	}
}

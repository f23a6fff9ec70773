package cni_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/ipfamily"
	nftnl "github.com/svcnet/svcnet/internal/nft/netlink"
)

func portMappings(ms ...map[string]any) map[string]any {
	return map[string]any{"runtimeConfig": map[string]any{"portMappings": ms}}
}

func pm(hostPort, containerPort int, proto string) map[string]any {
	return map[string]any{"hostPort": hostPort, "containerPort": containerPort, "protocol": proto}
}

// hostportTables returns the node's hostport tables as nft renders them.
func (l *lab) hostportTables() string {
	l.t.Helper()
	c, err := nftnl.New(l.node)
	if err != nil {
		l.t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		if t, err := c.Read(context.Background(), f, hostport.TableName); err == nil {
			b.WriteString(t.Render())
		}
	}
	return b.String()
}

// GC frees the addresses, veths and hostport rules of every attachment not
// in the valid list, and leaves the valid one working.
func TestGCRemovesInvalidAttachments(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	keep, drop1, drop2 := l.newPod(), l.newPod(), l.newPod()
	rKeep := l.add(keep, portMappings(pm(8080, 80, "tcp")))
	l.add(drop1, portMappings(pm(8081, 80, "tcp")))
	l.add(drop2, nil)
	if len(l.allocations()) != 6 {
		t.Fatalf("allocations %v", l.allocations())
	}
	valid := map[string]any{"cni.dev/valid-attachments": []map[string]string{{"containerID": keep.id, "ifname": "eth0"}}}
	if _, err := l.run("GC", nil, "", l.config(valid)); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if got := l.allocations(); fmt.Sprint(got) != "[192.168.1.2 fd00:192:168:1::2]" {
		t.Errorf("allocations after GC: %v", got)
	}
	veths := sh(t, l.node, "ip", "-o", "link", "show", "type", "veth")
	if strings.Count(veths, "\n") != 1 || !strings.Contains(veths, cni.HostVethName(keep.id, "eth0")) {
		t.Errorf("veths after GC:\n%s", veths)
	}
	tables := l.hostportTables()
	if strings.Contains(tables, drop1.id) || strings.Contains(tables, "8081") || !strings.Contains(tables, keep.id) {
		t.Errorf("hostport tables after GC:\n%s", tables)
	}
	if err := l.check(keep, portMappings(pm(8080, 80, "tcp")), rKeep); err != nil {
		t.Errorf("CHECK of the valid attachment after GC: %v", err)
	}
	// GC with nothing valid empties everything.
	if _, err := l.run("GC", nil, "", l.config(map[string]any{"cni.dev/valid-attachments": []any{}})); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if got := l.allocations(); len(got) != 0 {
		t.Errorf("allocations after full GC: %v", got)
	}
	if out := sh(t, l.node, "ip", "-o", "link", "show", "type", "veth"); out != "" {
		t.Errorf("veths after full GC: %s", out)
	}
	if tables := l.hostportTables(); strings.Contains(tables, keep.id) {
		t.Errorf("hostport rules after full GC:\n%s", tables)
	}
}

// A /29 holds five pods; the sixth ADD fails with a clear error and STATUS
// reports the network unavailable; a DEL makes room again.
func TestExhaustionAndStatus(t *testing.T) {
	l := newLab(t, "192.168.1.0/29")
	if _, err := l.run("STATUS", nil, "", l.config(nil)); err != nil {
		t.Fatalf("STATUS of an empty network: %v", err)
	}
	pods := make([]*pod, 6)
	for i := range pods {
		pods[i] = l.newPod()
	}
	for _, p := range pods[:5] {
		l.add(p, nil)
	}
	if got := l.allocations(); fmt.Sprint(got) != "[192.168.1.2 192.168.1.3 192.168.1.4 192.168.1.5 192.168.1.6]" {
		t.Fatalf("allocations %v (network, gateway and broadcast must be skipped)", got)
	}
	_, err := l.run("ADD", pods[5], "eth0", l.config(nil))
	if cniCode(err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), "container "+pods[5].id+" interface eth0: no free address") ||
		!strings.Contains(err.Error(), "subnet 192.168.1.0/29: no free address") {
		t.Fatalf("ADD into a full subnet: %v", err)
	}
	if out := sh(t, pods[5].ns, "ip", "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Fatalf("failed ADD left eth0 in the pod: %s", out)
	}
	_, err = l.run("STATUS", nil, "", l.config(nil))
	if cniCode(err) != types.ErrPluginNotAvailable || !strings.Contains(err.Error(), "192.168.1.0/29") {
		t.Fatalf("STATUS of a full network: %v", err)
	}
	l.del(pods[0], nil)
	if _, err := l.run("STATUS", nil, "", l.config(nil)); err != nil {
		t.Fatalf("STATUS after a DEL: %v", err)
	}
	if r := l.add(pods[5], nil); podIP(t, r, false).String() != "192.168.1.2" {
		t.Fatalf("ADD after DEL got %v", r.IPs)
	}
}

// STATUS fails with 50 when the IPAM store cannot be created.
func TestStatusUnusableStore(t *testing.T) {
	l := newLab(t, podCIDR4)
	_, err := l.run("STATUS", nil, "", l.config(map[string]any{"dataDir": "/proc/svcnet-cannot-exist"}))
	if cniCode(err) != types.ErrPluginNotAvailable || !strings.Contains(err.Error(), "IPAM store /proc/svcnet-cannot-exist is unusable") {
		t.Fatalf("STATUS: %v", err)
	}
}

package cni_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/cni"
)

// ADD on a dual-stack node: bridge with both gateways, forwarding, veth with
// MTU and hairpin, the pod's /32 and /128 with on-link default routes, its
// loopback up; the result says so; CHECK agrees.
func TestAddDualStack(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	p := l.newPod()
	r := l.add(p, map[string]any{"mtu": 1400, "dns": map[string]any{"nameservers": []string{"10.96.0.10"}}})

	if got := podIP(t, r, false); got.String() != "192.168.1.2" {
		t.Errorf("IPv4 address %s, want the first usable 192.168.1.2", got)
	}
	if got := podIP(t, r, true); got.String() != "fd00:192:168:1::2" {
		t.Errorf("IPv6 address %s, want fd00:192:168:1::2", got)
	}
	hostVeth := cni.HostVethName(p.id, "eth0")
	if len(r.Interfaces) != 3 || r.Interfaces[0].Name != "cni0" || r.Interfaces[1].Name != hostVeth ||
		r.Interfaces[2].Name != "eth0" || r.Interfaces[2].Sandbox != p.ns.Path() || r.Interfaces[2].Mtu != 1400 {
		b, _ := json.Marshal(r.Interfaces)
		t.Fatalf("interfaces %s", b)
	}
	for _, ip := range r.IPs {
		if ip.Interface == nil || *ip.Interface != 2 || ip.Gateway == nil {
			t.Errorf("ip %s: interface/gateway missing", ip)
		}
	}
	if len(r.Routes) != 2 || r.DNS.Nameservers[0] != "10.96.0.10" {
		t.Errorf("routes %v dns %v", r.Routes, r.DNS)
	}

	// The node.
	br := sh(t, l.node, "ip", "-d", "addr", "show", "dev", "cni0")
	for _, want := range []string{"bridge", "192.168.1.1/24", "fd00:192:168:1::1/64", "mtu 1400"} {
		if !strings.Contains(br, want) {
			t.Errorf("bridge lacks %q:\n%s", want, br)
		}
	}
	if strings.Contains(br, "tentative") {
		t.Errorf("bridge address waits for DAD:\n%s", br)
	}
	port := sh(t, l.node, "bridge", "-d", "link", "show", "dev", hostVeth)
	if !strings.Contains(port, "master cni0") || !strings.Contains(port, "hairpin on") || !strings.Contains(port, "mtu 1400") {
		t.Errorf("node end not a hairpin port of cni0 with mtu 1400:\n%s", port)
	}
	for _, s := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
		if out := sh(t, l.node, "sysctl", "-n", s); strings.TrimSpace(out) != "1" {
			t.Errorf("%s = %s", s, out)
		}
	}

	// The pod.
	eth0 := sh(t, p.ns, "ip", "addr", "show", "dev", "eth0")
	for _, want := range []string{"192.168.1.2/32", "fd00:192:168:1::2/128", "mtu 1400", "state UP"} {
		if !strings.Contains(eth0, want) {
			t.Errorf("pod eth0 lacks %q:\n%s", want, eth0)
		}
	}
	if strings.Contains(eth0, "tentative") {
		t.Errorf("pod address waits for DAD:\n%s", eth0)
	}
	if r4 := sh(t, p.ns, "ip", "route", "show", "default"); !strings.Contains(r4, "default via 192.168.1.1 dev eth0 onlink") {
		t.Errorf("pod IPv4 default route: %s", r4)
	}
	if r6 := sh(t, p.ns, "ip", "-6", "route", "show", "default"); !strings.Contains(r6, "default via fd00:192:168:1::1 dev eth0") || !strings.Contains(r6, "onlink") {
		t.Errorf("pod IPv6 default route: %s", r6)
	}
	if lo := sh(t, p.ns, "ip", "link", "show", "lo"); !strings.Contains(lo, "UP") {
		t.Errorf("pod loopback down: %s", lo)
	}
	if err := l.check(p, map[string]any{"mtu": 1400}, r); err != nil {
		t.Fatalf("CHECK after ADD: %v", err)
	}
	if got := l.allocations(); fmt.Sprint(got) != "[192.168.1.2 fd00:192:168:1::2]" {
		t.Fatalf("IPAM store: %v", got)
	}
}

// Two pods on one node reach each other and the gateway, over IPv4 and IPv6,
// by ICMP and TCP; a packet between the pods is routed by the node (its TTL
// drops by one, and the sender never learns the other pod's MAC).
func TestTwoPodsTalk(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	a, b := l.newPod(), l.newPod()
	ra, rb := l.add(a, nil), l.add(b, nil)
	serveWho(t, b.ns, 8080)
	for _, v6 := range []bool{false, true} {
		ipA, ipB := podIP(t, ra, v6), podIP(t, rb, v6)
		gw := netip.MustParseAddr(gw4)
		if v6 {
			gw = netip.MustParseAddr(gw6)
		}
		if ttl, err := ping(a.ns, gw); err != nil || ttl != 64 {
			t.Errorf("ping gateway %s from pod a: ttl %d, %v", gw, ttl, err)
		}
		if ttl, err := ping(a.ns, ipB); err != nil || ttl != 63 {
			t.Errorf("ping %s from pod a: ttl %d, %v (want 63: one routed hop through the node)", ipB, ttl, err)
		}
		who, err := askTCP(a.ns, netip.AddrPortFrom(ipB, 8080).String())
		if err != nil || who != ipA.String() {
			t.Errorf("TCP a->b %s: %q, %v; want the server to see %s", ipB, who, err, ipA)
		}
		if _, err := ping(l.node, ipA); err != nil {
			t.Errorf("node -> pod a: %v", err)
		}
	}
	neigh := sh(t, a.ns, "ip", "neigh", "show")
	if strings.Contains(neigh, podIP(t, rb, false).String()+" ") || strings.Contains(neigh, podIP(t, rb, true).String()+" ") {
		t.Errorf("pod a resolved pod b's address on the link itself:\n%s", neigh)
	}
}

// A repeated ADD of one container and interface returns the same result and
// changes nothing; DEL twice succeeds and leaves nothing.
func TestAddIdempotentDelTwice(t *testing.T) {
	l := newLab(t, podCIDR4)
	p := l.newPod()
	r1 := l.add(p, nil)
	r2 := l.add(p, nil)
	j1, _ := json.Marshal(r1)
	j2, _ := json.Marshal(r2)
	if string(j1) != string(j2) {
		t.Fatalf("repeated ADD differs:\n%s\n%s", j1, j2)
	}
	if got := l.allocations(); len(got) != 1 {
		t.Fatalf("IPAM store after two ADDs: %v", got)
	}
	if n := strings.Count(sh(t, l.node, "ip", "-o", "link", "show", "type", "veth"), "\n"); n != 1 {
		t.Fatalf("%d veths on the node after two ADDs", n)
	}
	if err := l.check(p, nil, r2); err != nil {
		t.Fatalf("CHECK: %v", err)
	}
	l.del(p, nil)
	l.del(p, nil)
	if got := l.allocations(); len(got) != 0 {
		t.Fatalf("IPAM store after DEL: %v", got)
	}
	if out := sh(t, l.node, "ip", "-o", "link", "show", "type", "veth"); out != "" {
		t.Fatalf("veths left: %s", out)
	}
	if out := sh(t, p.ns, "ip", "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Fatalf("pod still has eth0: %s", out)
	}
	// DEL of a container never added, without a namespace, succeeds too.
	if _, err := l.run("DEL", &pod{ns: p.ns, id: "never-added"}, "eth0", l.config(nil)); err != nil {
		t.Fatalf("DEL of an unknown container: %v", err)
	}
}

// DEL after the pod's namespace is gone frees the address and the veth.
func TestDelAfterNetnsGone(t *testing.T) {
	l := newLab(t, podCIDR4)
	p := l.newPod()
	l.add(p, nil)
	path := p.ns.Path()
	if err := p.ns.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.run("DEL", &pod{ns: p.ns, id: p.id}, "eth0", l.config(nil)); err != nil {
		t.Fatalf("DEL with %s gone: %v", path, err)
	}
	if got := l.allocations(); len(got) != 0 {
		t.Fatalf("address not freed: %v", got)
	}
	if out := sh(t, l.node, "ip", "-o", "link", "show", "type", "veth"); out != "" {
		t.Fatalf("veth left: %s", out)
	}
}

// Without an mtu in the configuration, the pod gets the MTU of the node's
// default-route interface.
func TestDefaultMTUFollowsDefaultRoute(t *testing.T) {
	l := newLab(t, podCIDR4)
	up := newOutside(t, l)
	sh(t, l.node, "ip", "link", "set", "ext0", "mtu", "1420")
	sh(t, l.node, "ip", "route", "add", "default", "via", up.addr4)
	p := l.newPod()
	r := l.add(p, nil)
	if r.Interfaces[2].Mtu != 1420 {
		t.Fatalf("pod MTU %d, want 1420 from the default route's interface", r.Interfaces[2].Mtu)
	}
	if out := sh(t, p.ns, "ip", "link", "show", "eth0"); !strings.Contains(out, "mtu 1420") {
		t.Fatalf("pod eth0: %s", out)
	}
}

// A pod interface of the requested name that is not the plugin's is an
// error (the spec's MUST), and the failed ADD leaves nothing behind.
func TestAddRefusesForeignInterface(t *testing.T) {
	l := newLab(t, podCIDR4)
	p := l.newPod()
	sh(t, p.ns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "other0")
	_, err := l.run("ADD", p, "eth0", l.config(nil))
	if cniCode(err) != cni.ErrInterfaceExists || !strings.Contains(err.Error(), "container "+p.id+" interface eth0") {
		t.Fatalf("ADD over a foreign eth0: %v", err)
	}
	if got := l.allocations(); len(got) != 0 {
		t.Fatalf("failed ADD kept addresses %v", got)
	}
	if out := sh(t, l.node, "ip", "-o", "link", "show", "type", "veth"); out != "" {
		t.Fatalf("failed ADD left a veth: %s", out)
	}
	if out := sh(t, p.ns, "ip", "-o", "link", "show", "eth0"); !strings.Contains(out, "eth0@other0") {
		t.Fatalf("the foreign eth0 was touched: %s", out)
	}
}

// CHECK names what drifted: a missing address, a node end taken off the
// bridge; and refuses to run without prevResult.
func TestCheckDetectsDrift(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	p := l.newPod()
	r := l.add(p, nil)
	if _, err := l.run("CHECK", p, "eth0", l.config(nil)); cniCode(err) != 7 || !strings.Contains(err.Error(), "prevResult") {
		t.Fatalf("CHECK without prevResult: %v", err)
	}
	sh(t, p.ns, "ip", "addr", "del", "192.168.1.2/32", "dev", "eth0")
	sh(t, l.node, "ip", "link", "set", cni.HostVethName(p.id, "eth0"), "nomaster")
	err := l.check(p, nil, r)
	if cniCode(err) != cni.ErrCheckFailed {
		t.Fatalf("CHECK after drift: %v", err)
	}
	for _, want := range []string{"address 192.168.1.2/32 is missing from pod interface eth0", "is not a port of bridge cni0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CHECK error lacks %q: %v", want, err)
		}
	}
	// A re-ADD repairs it.
	r2 := l.add(p, nil)
	if err := l.check(p, nil, r2); err != nil {
		t.Fatalf("CHECK after repairing ADD: %v", err)
	}
}

// VERSION through the plugin's real entry point (the test binary in plugin
// mode, as a runtime runs it).
func TestVersion(t *testing.T) {
	l := newLab(t, podCIDR4)
	out, err := l.exec("VERSION", nil, l.config(nil))
	if err != nil {
		t.Fatalf("VERSION: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`"supportedVersions":\["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"\]`).Match(out) {
		t.Fatalf("VERSION: %s", out)
	}
}

// A 1.0.0 configuration (what `svcnet cni install` writes for containerd
// 1.x, whose CNI library parses results up to 1.0.0) gets a 1.0.0 result
// with the attachment in it, and CHECK takes it back as prevResult.
func TestAddResultVersion100(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	p := l.newPod()
	conf := l.config(map[string]any{"cniVersion": "1.0.0"})
	out, err := l.run("ADD", p, "eth0", conf)
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(out, &head); err != nil || head.CNIVersion != "1.0.0" {
		t.Fatalf("result %s: cniVersion %q, %v; want 1.0.0", out, head.CNIVersion, err)
	}
	r, err := types100.NewResult(out)
	if err != nil {
		t.Fatal(err)
	}
	res := r.(*types100.Result)
	if len(res.IPs) != 2 || len(res.Interfaces) != 3 {
		t.Fatalf("result %s", out)
	}
	var prev map[string]any
	_ = json.Unmarshal(out, &prev)
	if _, err := l.run("CHECK", p, "eth0", l.config(map[string]any{"cniVersion": "1.0.0", "prevResult": prev})); err != nil {
		t.Errorf("CHECK with the 1.0.0 result: %v", err)
	}
}

package syncbench

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func nftIn(t *testing.T, ns *netns.NS, script string) {
	t.Helper()
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
}

// The monitor sees an element added to the watched map by nft in its namespace,
// and ignores elements of other maps and tables.
func TestMonitorSeesElement(t *testing.T) {
	ns := netnstest.New(t, "benchmon")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := StartMonitor(ctx, ns, svcnetFrontends)
	if err != nil {
		t.Fatalf("StartMonitor: %v", err)
	}
	defer m.Close()

	nftIn(t, ns, `
table ip svcnet {
	map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }
	map other { type ipv4_addr . inet_proto . inet_service : verdict; }
	chain svc-a { }
}
table ip svcnet-nat-03 {
	map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }
	chain svc-b { }
}
table ip kube-proxy {
	map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }
}
add element ip svcnet other { 10.96.0.8 . tcp . 80 : drop }
add element ip kube-proxy service-ips { 10.96.0.9 . tcp . 80 : drop }
`)
	before := time.Now()
	nftIn(t, ns, `add element ip svcnet service-ips { 10.96.0.7 . tcp . 80 : goto svc-a }`)

	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	at, err := m.Wait(wctx, netip.MustParseAddr("10.96.0.7"))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if at.Before(before) || time.Since(at) > 5*time.Second {
		t.Errorf("arrival %v not between the add (%v) and now", at, before)
	}
	// A table of the group by its prefix (a svcnet shard) counts too.
	nftIn(t, ns, `add element ip svcnet-nat-03 service-ips { 10.96.0.6 . tcp . 80 : goto svc-b }`)
	if _, err := m.Wait(wctx, netip.MustParseAddr("10.96.0.6")); err != nil {
		t.Fatalf("Wait for the shard's element: %v", err)
	}
	for _, ip := range []string{"10.96.0.8", "10.96.0.9"} {
		sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
		if _, err := m.Wait(sctx, netip.MustParseAddr(ip)); err == nil {
			t.Errorf("element %s of another map was recorded", ip)
		}
		scancel()
	}
	if n := m.Overruns(); n != 0 {
		t.Errorf("overruns = %d", n)
	}
}

func iptablesRestoreIn(t *testing.T, ns *netns.NS, rules string) {
	t.Helper()
	cmd := ns.Command("iptables-nft-restore", "--noflush")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("iptables-nft-restore: %v: %s\n%s", err, out, rules)
	}
}

// The monitor of the iptables layout sees the KUBE-SERVICES rule of a
// ClusterIP written by iptables-nft-restore, as kube-proxy and svcnet's
// iptables plane write it, and ignores rules that are not frontends: another
// chain, another table, a masked address, a rule without a jump, svcnet's
// KUBE-NODEPORTS rule (an address without a port).
func TestMonitorSeesIPTablesFrontend(t *testing.T) {
	if _, err := exec.LookPath("iptables-nft-restore"); err != nil {
		t.Fatalf("iptables-nft-restore: %v", err)
	}
	ns := netnstest.New(t, "benchmon")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := StartMonitor(ctx, ns, IPTablesFrontends)
	if err != nil {
		t.Fatalf("StartMonitor: %v", err)
	}
	defer m.Close()

	iptablesRestoreIn(t, ns, `*filter
:KUBE-SERVICES - [0:0]
:KUBE-SERVICES-OTHER - [0:0]
-A KUBE-SERVICES -d 10.96.0.20/32 -p tcp -m comment --comment "bench/none:p has no endpoints" -m tcp --dport 80 -j REJECT
-A KUBE-SERVICES -d 10.96.0.21/32 -p tcp -m tcp --dport 80 -j KUBE-SERVICES-OTHER
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-OTHER - [0:0]
:KUBE-NODEPORTS - [0:0]
-A KUBE-SERVICES -d 10.96.0.0/16 -p tcp -j KUBE-SVC-OTHER
-A KUBE-SERVICES -d 10.96.0.22/32 -p tcp -m tcp --dport 80 -j ACCEPT
-A KUBE-SERVICES -d 10.96.0.24/32 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -j KUBE-NODEPORTS
-A KUBE-SVC-OTHER -d 10.96.0.23/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ
COMMIT
`)
	before := time.Now()
	iptablesRestoreIn(t, ns, `*nat
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
-A KUBE-SERVICES -m comment --comment "bench/a:p cluster IP" -m tcp -p tcp -d 10.96.0.7/32 --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA
COMMIT
`)
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	at, err := m.Wait(wctx, netip.MustParseAddr("10.96.0.7"))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if at.Before(before) || time.Since(at) > 5*time.Second {
		t.Errorf("arrival %v not between the restore (%v) and now", at, before)
	}
	for _, ip := range []string{"10.96.0.0", "10.96.0.20", "10.96.0.21", "10.96.0.22", "10.96.0.23", "10.96.0.24"} {
		sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
		if _, err := m.Wait(sctx, netip.MustParseAddr(ip)); err == nil {
			t.Errorf("rule of %s, not a frontend, was recorded", ip)
		}
		scancel()
	}
	if n := m.Overruns(); n != 0 {
		t.Errorf("overruns = %d", n)
	}
	n, err := countFrontends(ns, IPTablesFrontends)
	if err != nil || n != 1 {
		t.Errorf("countFrontends = %d, %v; want 1 (the ClusterIP rule alone)", n, err)
	}
}

// Wait returns an error, not a hang, once the monitor is closed.
func TestMonitorClosed(t *testing.T) {
	ns := netnstest.New(t, "benchmon")
	m, err := StartMonitor(context.Background(), ns, svcnetFrontends)
	if err != nil {
		t.Fatalf("StartMonitor: %v", err)
	}
	m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := m.Wait(ctx, netip.MustParseAddr("10.96.0.1")); err == nil || ctx.Err() != nil {
		t.Fatalf("Wait after Close: err = %v, ctx = %v; want a prompt monitor-stopped error", err, ctx.Err())
	}
}

// countMapElements counts service-ips elements over svcnet's main table and
// shards, and leaves other maps and tables out.
func TestCountMapElements(t *testing.T) {
	out := `table ip svcnet {
	map firewall-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 172.26.236.180 . tcp . 80 : goto "firewall-A" }
	}
}
table ip svcnet-nat-00 {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.1 . tcp . 80 : goto "service-A",
			     10.96.0.2 . tcp . 80 : goto "service-B" }
	}
}
table ip svcnet-nat-01 {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.3 . tcp . 80 : goto "service-C" }
	}
}
table ip kube-proxy {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.4 . tcp . 80 : goto "service-D" }
	}
}
`
	if n := countMapElements(out, TableMatch{Name: "svcnet", Prefix: "svcnet-nat-"}, "service-ips"); n != 3 {
		t.Errorf("svcnet: %d elements, want 3", n)
	}
	if n := countMapElements(out, TableMatch{Name: "kube-proxy"}, "service-ips"); n != 1 {
		t.Errorf("kube-proxy: %d elements, want 1", n)
	}
}

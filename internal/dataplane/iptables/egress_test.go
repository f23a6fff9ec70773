package iptables

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/goldentest"
	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// testEgress is the egress masquerade of the lab's plan: pod and Service
// networks of both families, two IPv4 non-masquerade CIDRs.
func testEgress() servicetable.EgressMasquerade {
	return servicetable.EgressMasquerade{
		PodCIDRs:           []netip.Prefix{cidr("192.168.0.0/16"), cidr("fd00:192:168::/56")},
		ServiceCIDRs:       []netip.Prefix{cidr("10.96.0.0/12"), cidr("fd00:96::/108")},
		NonMasqueradeCIDRs: []netip.Prefix{cidr("10.0.0.0/8"), cidr("198.18.0.0/15")},
	}
}

// egressNode is testNode with egress masquerade, changed by edit.
func egressNode(edit func(e *servicetable.EgressMasquerade)) servicetable.NodeConfig {
	n := testNode()
	n.Egress = testEgress()
	if edit != nil {
		edit(&n.Egress)
	}
	return n
}

// TestRenderEgressGolden pins the egress masquerade chain of each family
// (the clusterip row beside it); without egress masquerade the chain is
// declared and empty, so the jump to it stays valid.
func TestRenderEgressGolden(t *testing.T) {
	var cip feature
	for _, f := range features() {
		if f.name == "clusterip" {
			cip = f
		}
	}
	tbl := build(t, egressNode(nil), cip.svcs, cip.slices...)
	goldentest.Check(t, "egress-ip.golden", Render(tbl, ipfamily.IPv4).Full())
	goldentest.Check(t, "egress-ip6.golden", Render(tbl, ipfamily.IPv6).Full())
	for _, f := range ipfamily.All {
		off := Render(build(t, testNode(), cip.svcs, cip.slices...), f)
		if c := off.Chains(TableNAT)[ChainEgressMasq]; c == nil || len(c.Rules) != 0 {
			t.Errorf("%s without egress masquerade: chain %+v, want declared and empty", f, c)
		}
	}
}

// TestSimulatedEgress walks first packets through the rendered rules with
// egress masquerade, nat POSTROUTING included: a pod's packet to anywhere
// outside the pod, Service, link-local and non-masquerade networks is
// masqueraded by the egress chain; pod-to-pod, pod-to-Service and
// everything not from a pod keeps its source; a packet the Service
// masquerade took is masqueraded once, by KUBE-POSTROUTING.
func TestSimulatedEgress(t *testing.T) {
	ap := netip.MustParseAddrPort
	pod, pod6 := ap("192.168.1.5:40000"), ap("[fd00:192:168:1::5]:40000")
	client, node := ap("172.26.236.10:40000"), ap("172.26.236.177:40000")
	type probe struct {
		name   string
		src    netip.AddrPort
		dst    string
		output bool
		want   []string
	}
	on := []probe{
		{"pod to outside", pod, "203.0.113.7:443", false, []string{"pass egress-masq 1"}},
		{"pod to the node network", pod, "172.26.236.10:80", false, []string{"pass egress-masq 1"}},
		{"pod to a pod on another node", pod, "192.168.2.10:80", false, []string{"pass 1"}},
		{"pod to a ClusterIP: DNAT to pods, source kept", pod, "10.96.0.20:80", false,
			[]string{"dnat 192.168.1.10:8080 1/3", "dnat 192.168.2.10:8080 1/3", "dnat 192.168.3.10:8080 1/3"}},
		{"pod to the Service network, no Service", pod, "10.100.0.1:80", false, []string{"pass 1"}},
		{"pod to link-local", pod, "169.254.169.254:80", false, []string{"pass 1"}},
		{"pod to a non-masquerade CIDR", pod, "10.1.2.3:80", false, []string{"pass 1"}},
		{"client forwarded through the node", client, "203.0.113.7:443", false, []string{"pass 1"}},
		{"the node itself", node, "203.0.113.7:443", true, []string{"pass 1"}},
		{"client to a ClusterIP: the Service masquerade only", client, "10.96.0.20:80", false,
			[]string{"dnat 192.168.1.10:8080 masq 1/3", "dnat 192.168.2.10:8080 masq 1/3", "dnat 192.168.3.10:8080 masq 1/3"}},
		{"IPv6 pod to outside", pod6, "[2001:db8::7]:443", false, []string{"pass egress-masq 1"}},
		{"IPv6 pod to a pod", pod6, "[fd00:192:168:2::10]:80", false, []string{"pass 1"}},
		{"IPv6 pod to link-local", pod6, "[fe80::1]:80", false, []string{"pass 1"}},
	}
	linkLocal := []probe{
		{"pod to link-local, masqLinkLocal", pod, "169.254.169.254:80", false, []string{"pass egress-masq 1"}},
		{"pod to outside, masqLinkLocal", pod, "203.0.113.7:443", false, []string{"pass egress-masq 1"}},
	}
	off := []probe{
		{"pod to outside, egress masquerade off", pod, "203.0.113.7:443", false, []string{"pass 1"}},
		{"IPv6 pod to outside, egress masquerade off", pod6, "[2001:db8::7]:443", false, []string{"pass 1"}},
	}
	for _, set := range []struct {
		name   string
		node   servicetable.NodeConfig
		probes []probe
	}{
		{"on", egressNode(nil), on},
		{"masqLinkLocal", egressNode(func(e *servicetable.EgressMasquerade) { e.MasqueradeLinkLocal = true }), linkLocal},
		{"off", testNode(), off},
	} {
		for _, p := range set.probes {
			t.Run(set.name+"/"+p.name, func(t *testing.T) {
				dst := ap(p.dst)
				s := newSimulator(t, Render(featureTable(t, set.node), ipfamily.Of(dst.Addr())))
				got := fates(s.walk(simPacket{src: p.src, dst: dst, proto: "tcp", output: p.output}))
				if !slices.Equal(got, p.want) {
					t.Fatalf("fates\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(p.want, "\n      "))
				}
			})
		}
	}
}

// TestSyncEgressChange: turning egress masquerade on, changing its CIDRs and
// turning it off are each a full sync that leaves the egress chain as
// rendered.
func TestSyncEgressChange(t *testing.T) {
	ctx := context.Background()
	k := ipt.NewFake()
	b := New(k)
	if _, err := b.Sync(ctx, featureTable(t, testNode()), false); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		node servicetable.NodeConfig
	}{
		{"on", egressNode(nil)},
		{"another non-masquerade CIDR", egressNode(func(e *servicetable.EgressMasquerade) {
			e.NonMasqueradeCIDRs = append(e.NonMasqueradeCIDRs, cidr("100.64.0.0/10"))
		})},
		{"off", testNode()},
	} {
		tbl := featureTable(t, step.node)
		st, err := b.Sync(ctx, tbl, false)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if !st.Full || st.TotalOps() == 0 {
			t.Fatalf("%s: %+v, want a full sync that changes something", step.name, st)
		}
		for _, f := range ipfamily.All {
			got := natTable(t, k, f, TableNAT).Chains[ChainEgressMasq]
			want := Render(tbl, f).Chains(TableNAT)[ChainEgressMasq]
			if got == nil || !slices.Equal(got.Rules, want.Rules) {
				t.Errorf("%s, %s: the kernel's %s is %+v, want %q", step.name, f, ChainEgressMasq, got, want.Rules)
			}
		}
	}
}

// TestKernelEgress programs the egress masquerade through the backend into
// a throwaway namespace's kernel (iptables-nft, both families): POSTROUTING
// jumps to KUBE-POSTROUTING first, then to the egress chain, which holds
// the rendered rules; turning egress masquerade off empties the chain (the
// jump stays, valid), and Cleanup removes both.
func TestKernelEgress(t *testing.T) {
	ns := netnstest.New(t, "iptegress")
	ctx := context.Background()
	k := kernel(ns)
	b := New(k)
	on := featureTable(t, egressNode(nil))
	if _, err := b.Sync(ctx, on, false); err != nil {
		t.Fatalf("sync with egress masquerade: %v", err)
	}
	targets := func(c *ipt.Chain) []string {
		var out []string
		for _, r := range c.Rules {
			out = append(out, ipt.JumpTarget(r))
		}
		return out
	}
	for _, f := range ipfamily.All {
		nat := natTable(t, k, f, TableNAT)
		if got, want := targets(nat.Chains["POSTROUTING"]), []string{ChainPostrouting, ChainEgressMasq}; !slices.Equal(got, want) {
			t.Errorf("%s: POSTROUTING jumps to %v, want %v", f, got, want)
		}
		got, want := nat.Chains[ChainEgressMasq], Render(on, f).Chains(TableNAT)[ChainEgressMasq]
		if got == nil || len(got.Rules) != len(want.Rules) || len(want.Rules) == 0 {
			t.Fatalf("%s: the kernel's egress chain %+v, want %d rules", f, got, len(want.Rules))
		}
		for _, r := range got.Rules {
			if !strings.Contains(r, "-j RETURN") && !strings.Contains(r, "-j MASQUERADE --random-fully") {
				t.Errorf("%s: unexpected egress rule %q", f, r)
			}
		}
	}
	if _, err := b.Sync(ctx, featureTable(t, testNode()), false); err != nil {
		t.Fatalf("egress masquerade off: %v", err)
	}
	for _, f := range ipfamily.All {
		nat := natTable(t, k, f, TableNAT)
		if c := nat.Chains[ChainEgressMasq]; c == nil || len(c.Rules) != 0 {
			t.Errorf("%s: egress chain after turning it off: %+v, want empty", f, c)
		}
	}
	if err := b.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range ipfamily.All {
		nat := natTable(t, k, f, TableNAT)
		if c := nat.Chains[ChainEgressMasq]; c != nil || jumpsTo(nat.Chains["POSTROUTING"], ChainEgressMasq) {
			t.Errorf("%s: egress chain or jump left after Cleanup:\n%s", f, nat.Save())
		}
	}
}

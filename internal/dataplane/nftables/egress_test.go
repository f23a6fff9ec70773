package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/goldentest"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/nft/sim"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// testEgress is the egress masquerade of the lab's plan: pod and Service
// networks of both families, one IPv4 non-masquerade CIDR.
func testEgress() servicetable.EgressMasquerade {
	return servicetable.EgressMasquerade{
		PodCIDRs:           []netip.Prefix{cidr("192.168.0.0/16"), cidr("fd00:192:168::/56")},
		ServiceCIDRs:       []netip.Prefix{cidr("10.96.0.0/12"), cidr("fd00:96::/108")},
		NonMasqueradeCIDRs: []netip.Prefix{cidr("10.0.0.0/8"), cidr("198.18.0.0/15")},
	}
}

func egressTable(edit func(e *servicetable.EgressMasquerade)) *servicetable.Table {
	return detectTable(func(n *servicetable.NodeConfig) {
		n.Egress = testEgress()
		if edit != nil {
			edit(&n.Egress)
		}
	})
}

// TestRenderEgressGolden pins the egress masquerade chain of each family and
// the jump to it at the end of nat postrouting, after the Service
// masquerade; without egress masquerade neither exists.
func TestRenderEgressGolden(t *testing.T) {
	v4, v6 := Render(egressTable(nil), ipfamily.IPv4), Render(egressTable(nil), ipfamily.IPv6)
	goldentest.Check(t, "egress-ip.nft", v4[0].Render())
	goldentest.Check(t, "egress-ip6.nft", v6[0].Render())
	post := v4[0].Chains[chainNatPostrouting].Rules
	if n := len(post); n != 2 || post[0].Render(ipfamily.IPv4) != "jump masquerading" || post[1].Render(ipfamily.IPv4) != "jump egress-masquerading" {
		t.Errorf("nat-postrouting: want the Service masquerade, then egress")
	}
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		off := Render(detectTable(func(*servicetable.NodeConfig) {}), f)[0]
		if _, ok := off.Chains[chainEgressMasquerading]; ok || len(off.Chains[chainNatPostrouting].Rules) != 1 {
			t.Errorf("%s without egress masquerade: chain or jump rendered:\n%s", f, off.Render())
		}
	}
}

// TestSimulatedEgress runs first packets through node1's rules with egress
// masquerade: a pod's packet to anywhere outside the pod, Service, link-local
// and non-masquerade networks leaves with the node's address; pod-to-pod,
// pod-to-Service and everything not from a pod keeps its source; a packet the
// Service masquerade took is masqueraded once, by it.
func TestSimulatedEgress(t *testing.T) {
	ap := netip.MustParseAddrPort
	pod, pod6 := ap("192.168.1.5:40000"), ap("[fd00:192:168:1::5]:40000")
	client, node := ap("172.26.236.10:40000"), ap("172.26.236.177:40000")
	type probe struct {
		name string
		path sim.Path
		src  netip.AddrPort
		dst  string
		// want lists the outcomes as "src>dst" of the final packet, and
		// by the chain that masqueraded it, if any.
		want []string
	}
	masq := func(src, dst, chain string) string { return src + ">" + dst + " by " + chain }
	kept := func(src netip.AddrPort, dst string) string { return src.String() + ">" + dst }
	base := []probe{
		{"pod to outside", sim.PathPrerouting, pod, "203.0.113.7:443", []string{masq("172.26.236.177:40000", "203.0.113.7:443", chainEgressMasquerading)}},
		{"pod to the node network", sim.PathPrerouting, pod, "172.26.236.10:80", []string{masq("172.26.236.177:40000", "172.26.236.10:80", chainEgressMasquerading)}},
		{"pod to a pod on another node", sim.PathPrerouting, pod, "192.168.2.10:80", []string{kept(pod, "192.168.2.10:80")}},
		{"pod to a pod on this node", sim.PathPrerouting, pod, "192.168.1.10:80", []string{kept(pod, "192.168.1.10:80")}},
		{"pod to a ClusterIP: DNAT to pods, source kept", sim.PathPrerouting, pod, "10.96.0.20:80", []string{kept(pod, "192.168.1.10:80"), kept(pod, "192.168.2.10:80")}},
		{"pod to the Service network, no Service", sim.PathPrerouting, pod, "10.100.0.1:80", []string{kept(pod, "10.100.0.1:80")}},
		{"pod to link-local", sim.PathPrerouting, pod, "169.254.169.254:80", []string{kept(pod, "169.254.169.254:80")}},
		{"pod to a non-masquerade CIDR", sim.PathPrerouting, pod, "10.1.2.3:80", []string{kept(pod, "10.1.2.3:80")}},
		{"client forwarded through the node", sim.PathPrerouting, client, "203.0.113.7:443", []string{kept(client, "203.0.113.7:443")}},
		{"the node itself", sim.PathOutput, node, "203.0.113.7:443", []string{kept(node, "203.0.113.7:443")}},
		{"client to a ClusterIP: the Service masquerade only", sim.PathPrerouting, client, "10.96.0.20:80", []string{
			masq("172.26.236.177:40000", "192.168.2.10:80", "masquerading"), masq("192.168.1.1:40000", "192.168.1.10:80", "masquerading")}},
		{"IPv6 pod to outside", sim.PathPrerouting, pod6, "[2001:db8::7]:443", []string{masq("[fd00:26:236::177]:40000", "[2001:db8::7]:443", chainEgressMasquerading)}},
		{"IPv6 pod to a pod", sim.PathPrerouting, pod6, "[fd00:192:168:2::10]:80", []string{kept(pod6, "[fd00:192:168:2::10]:80")}},
		{"IPv6 pod to link-local", sim.PathPrerouting, pod6, "[fe80::1]:80", []string{kept(pod6, "[fe80::1]:80")}},
	}
	linkLocal := []probe{
		{"pod to link-local, masqLinkLocal", sim.PathPrerouting, pod, "169.254.169.254:80", []string{masq("172.26.236.177:40000", "169.254.169.254:80", chainEgressMasquerading)}},
		{"pod to outside, masqLinkLocal", sim.PathPrerouting, pod, "203.0.113.7:443", []string{masq("172.26.236.177:40000", "203.0.113.7:443", chainEgressMasquerading)}},
	}
	off := []probe{
		{"pod to outside, egress masquerade off", sim.PathPrerouting, pod, "203.0.113.7:443", []string{kept(pod, "203.0.113.7:443")}},
		{"IPv6 pod to outside, egress masquerade off", sim.PathPrerouting, pod6, "[2001:db8::7]:443", []string{kept(pod6, "[2001:db8::7]:443")}},
	}
	for _, set := range []struct {
		name   string
		tbl    *servicetable.Table
		probes []probe
	}{
		{"on", egressTable(nil), base},
		{"masqLinkLocal", egressTable(func(e *servicetable.EgressMasquerade) { e.MasqueradeLinkLocal = true }), linkLocal},
		{"off", detectTable(func(*servicetable.NodeConfig) {}), off},
	} {
		simr := sim.New(func() time.Time { return time.Unix(1000, 0) }, Render(set.tbl)...)
		for _, p := range set.probes {
			t.Run(set.name+"/"+p.name, func(t *testing.T) {
				fam := ipfamily.IPv4
				if p.src.Addr().Is6() {
					fam = ipfamily.IPv6
				}
				ctx := sim.Context{LocalAddrs: node1Addrs, Path: p.path, InIface: "veth1a2b", EgressAddr: egress}
				if p.path == sim.PathOutput {
					ctx.InIface = ""
				}
				outs, err := simr.Enumerate(ctx, sim.Packet{Family: fam, Proto: nft.ProtoTCP, Src: p.src, Dst: netip.MustParseAddrPort(p.dst)})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, o := range outs {
					if o.Result.Verdict != sim.Accepted {
						t.Fatalf("%s: %s", o.Result.Verdict, outcomeString(o))
					}
					s := fmt.Sprintf("%s>%s", o.Result.Final.Src, o.Result.Final.Dst)
					for _, st := range o.Result.Trace {
						if st.Action == sim.ActMasquerade {
							s += " by " + st.Chain
						}
					}
					got = append(got, s)
				}
				slices.Sort(got)
				if !slices.Equal(got, p.want) {
					t.Errorf("got %v, want %v", got, p.want)
				}
			})
		}
	}
}

// TestSyncEgressChange: turning egress masquerade on, changing its CIDRs and
// turning it off are each one full sync that leaves the kernel equal to a
// fresh render, and touch no Service port's objects.
func TestSyncEgressChange(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := New(k)
	tbl := detectTable(func(*servicetable.NodeConfig) {})
	if _, err := b.Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	kernelMatches(t, k, tbl)
	for _, step := range []struct {
		name string
		tbl  *servicetable.Table
	}{
		{"on", egressTable(nil)},
		{"another non-masquerade CIDR", egressTable(func(e *servicetable.EgressMasquerade) {
			e.NonMasqueradeCIDRs = append(e.NonMasqueradeCIDRs, cidr("100.64.0.0/10"))
		})},
		{"off", detectTable(func(*servicetable.NodeConfig) {})},
	} {
		var txs []*nft.Tx
		k.FailApply = func(tx *nft.Tx) error { txs = append(txs, tx); return nil }
		st, err := b.Sync(ctx, step.tbl, false)
		k.FailApply = nil
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if !st.Full || st.TotalOps() == 0 {
			t.Fatalf("%s: %+v, want a full sync that changes something", step.name, st)
		}
		kernelMatches(t, k, step.tbl)
		for _, tx := range txs {
			for _, op := range tx.Ops {
				if strings.Contains(op.Name, "default/") {
					t.Errorf("%s: touched a Service port's object: op %d on %s", step.name, op.Kind, op.Name)
				}
			}
		}
	}
}

// TestKernelEgress programs the egress masquerade into a throwaway
// namespace's kernel (both families): the kernel takes it, reads back as
// rendered (a restarted backend changes nothing), and turning it off
// removes the chain and the jump.
func TestKernelEgress(t *testing.T) {
	ns := netnstest.New(t, "nftegress")
	conn, err := netlink.New(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	on := egressTable(nil)
	if _, err := New(conn).Sync(ctx, on, false); err != nil {
		t.Fatalf("sync with egress masquerade: %v", err)
	}
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		got, err := conn.Read(ctx, f, TableName)
		if err != nil {
			t.Fatal(err)
		}
		if want := Render(on, f)[0].Render(); got.Render() != want {
			t.Errorf("%s: the kernel's table differs from the rendering:\n%s\nwant:\n%s", f, got.Render(), want)
		}
	}
	b := New(conn)
	if st, err := b.Sync(ctx, on, false); err != nil || st.TotalOps() != 0 {
		t.Fatalf("a restarted backend changed %d ops (err %v)", st.TotalOps(), err)
	}
	if _, err := b.Sync(ctx, detectTable(func(*servicetable.NodeConfig) {}), false); err != nil {
		t.Fatalf("egress masquerade off: %v", err)
	}
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		got, err := conn.Read(ctx, f, TableName)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Chains[chainEgressMasquerading]; ok || strings.Contains(got.Render(), "jump egress-masquerading") {
			t.Errorf("%s: egress masquerade left in the kernel after turning it off:\n%s", f, got.Render())
		}
	}
}

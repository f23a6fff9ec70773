package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/goldentest"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/sim"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// detectModes are kube-proxy's --detect-local-mode values as the node
// config carries them (NodeCIDR is ClusterCIDR with the Node's podCIDRs,
// resolved by the proxier), plus no detection at all.
var detectModes = []struct {
	name string
	edit func(n *servicetable.NodeConfig)
}{
	{"cidr", func(n *servicetable.NodeConfig) {}},
	{"node-cidr", func(n *servicetable.NodeConfig) {
		n.ClusterCIDRs = []netip.Prefix{cidr("192.168.1.0/24"), cidr("fd00:192:168:1::/64")}
	}},
	{"bridge", func(n *servicetable.NodeConfig) { n.ClusterCIDRs, n.PodInterface = nil, "cbr0" }},
	{"prefix", func(n *servicetable.NodeConfig) {
		n.ClusterCIDRs, n.PodInterface, n.PodInterfacePrefix = nil, "veth", true
	}},
	{"none", func(n *servicetable.NodeConfig) { n.ClusterCIDRs = nil }},
}

// detectTable is a ClusterIP Service and an externalTrafficPolicy Local
// LoadBalancer Service (the two places local traffic detection shows), and an
// IPv6 ClusterIP Service.
func detectTable(edit func(n *servicetable.NodeConfig)) *servicetable.Table {
	n := testNode()
	edit(&n)
	e1, e2 := ep("192.168.1.10", 80, true), ep("192.168.2.10", 80, false)
	cip := sp("default", "clusterip", "http", model.ProtocolTCP, "10.96.0.20", 80, e1, e2)
	etp := withLB(withNodePort(sp("default", "etp-local", "", model.ProtocolTCP, "10.96.0.26", 80, e1, e2), 30082, n), "172.26.236.181")
	etp.ExternalPolicyLocal = true
	etp.HealthCheckNodePort = 32000
	v6 := sp("default", "v6", "", model.ProtocolTCP, "fd00:96::10", 80, ep("fd00:192:168:1::10", 80, true))
	t := &servicetable.Table{Node: n, Ports: []*servicetable.ServicePort{cip, etp, v6}}
	sortPorts(t)
	return t
}

// TestRenderDetectLocalGolden pins the rules of each detect-local mode: the
// ClusterIP masquerade of traffic not from a local pod (`ip saddr != CIDR`,
// `iifname != "cbr0"`, `iifname != "veth*"`) and the externalTrafficPolicy
// Local short-circuit of traffic from one, as kube-proxy's nftables mode
// writes them (IfNotLocalNFT, IfLocalNFT); with no detection, neither rule.
func TestRenderDetectLocalGolden(t *testing.T) {
	for _, m := range detectModes {
		goldentest.Check(t, "detect-"+m.name+"-ip.nft", renderAll(Render(detectTable(m.edit), ipfamily.IPv4)))
	}
	// An interface detector holds in both families.
	goldentest.Check(t, "detect-prefix-ip6.nft", renderAll(Render(detectTable(detectModes[3].edit), ipfamily.IPv6)))
}

// TestRenderMasqueradeMarkGolden pins the rules that carry the masquerade
// mark for --masquerade-bit 5 (0x20): set in mark-for-masquerade, tested and
// cleared in masquerading; nothing else uses kube-proxy's default 0x4000.
func TestRenderMasqueradeMarkGolden(t *testing.T) {
	tbl := detectTable(func(n *servicetable.NodeConfig) { n.MasqueradeMark = 1 << 5 })
	text := renderAll(Render(tbl, ipfamily.IPv4))
	goldentest.Check(t, "masquerade-bit-5-ip.nft", text)
	if strings.Contains(text, "0x00004000") || strings.Count(text, "0x00000020") != 3 {
		t.Errorf("want the mark 0x20 in three places and 0x4000 nowhere:\n%s", text)
	}
}

// TestSimulatedDetectLocal runs packets through each mode's rules: whether a
// ClusterIP connection is masqueraded, and whether an externalTrafficPolicy
// Local LoadBalancer IP short-circuits to every endpoint, depends only on
// whether the mode counts the sender as a local pod. Pods here: 192.168.1.5
// on a routed veth "veth1a2b" (node1's pod CIDR), 192.168.2.5 on the bridge
// "cbr0" (another node's pod CIDR, as a pod whose IP moved would be); the
// client 172.26.236.10 arrives on eth0; the node itself sends from
// 172.26.236.177.
func TestSimulatedDetectLocal(t *testing.T) {
	ap := netip.MustParseAddrPort
	type sender struct {
		name  string
		src   netip.AddrPort
		iface string // "" for the node itself (output path)
	}
	veth := sender{"pod on a veth", ap("192.168.1.5:40000"), "veth1a2b"}
	bridged := sender{"pod on the bridge", ap("192.168.2.5:40000"), "cbr0"}
	client := sender{"client", ap("172.26.236.10:40000"), "eth0"}
	host := sender{"node", ap("172.26.236.177:40000"), ""}
	// local: which senders the mode counts as local pods.
	local := map[string][]sender{
		"cidr":      {veth, bridged},
		"node-cidr": {veth},
		"bridge":    {bridged},
		"prefix":    {veth},
		"none":      nil,
	}
	for _, m := range detectModes {
		for _, s := range []sender{veth, bridged, client, host} {
			t.Run(m.name+"/"+s.name, func(t *testing.T) {
				isLocal := slices.Contains(local[m.name], s)
				simr := sim.New(func() time.Time { return time.Unix(1000, 0) }, Render(detectTable(m.edit))...)
				ctx := sim.Context{LocalAddrs: node1Addrs, Path: sim.PathPrerouting, InIface: s.iface, EgressAddr: egress}
				if s.iface == "" {
					ctx.Path = sim.PathOutput
				}
				run := func(dst string) []string {
					outs, err := simr.Enumerate(ctx, sim.Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: s.src, Dst: ap(dst)})
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, o := range outs {
						got = append(got, fmt.Sprintf("%s>%s", o.Result.Final.Src.Addr(), o.Result.Final.Dst))
					}
					slices.Sort(got)
					return got
				}
				// ClusterIP: a sender the mode does not count as a local pod
				// is masqueraded to the node's address towards the
				// endpoint; with no detection at all, nobody is (kube-proxy
				// masquerades off-cluster traffic only when it can tell).
				want := []string{s.src.Addr().String() + ">192.168.1.10:80", s.src.Addr().String() + ">192.168.2.10:80"}
				if !isLocal && m.name != "none" {
					want = []string{"172.26.236.177>192.168.2.10:80", "192.168.1.1>192.168.1.10:80"}
				}
				if got := run("10.96.0.20:80"); !slices.Equal(got, want) {
					t.Errorf("ClusterIP: %v, want %v", got, want)
				}
				// ETP Local LB IP: a local pod short-circuits to every
				// endpoint with its address kept; others from outside reach
				// the local endpoint only with their address kept.
				if s.iface == "" {
					return // the node itself: masqueraded short-circuit, as TestSimulatedFeatureRows shows
				}
				want = []string{s.src.Addr().String() + ">192.168.1.10:80"}
				if isLocal {
					want = append(want, s.src.Addr().String()+">192.168.2.10:80")
				}
				if got := run("172.26.236.181:80"); !slices.Equal(got, want) {
					t.Errorf("ETP Local LB IP: %v, want %v", got, want)
				}
			})
		}
	}
}

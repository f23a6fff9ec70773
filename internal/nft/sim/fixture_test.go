package sim

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// addrs is the cluster the fixture table serves, in one family.
type addrs struct {
	fam         ipfamily.Family
	clusterCIDR netip.Prefix // pods; traffic from elsewhere to a ClusterIP is masqueraded
	localPods   netip.Prefix // this node's pod subnet, behind the bridge
	loopback    netip.Prefix
	lo          netip.Addr // in loopback
	node        netip.Addr // this node
	otherNode   netip.Addr
	bridge      netip.Addr // this node's pod gateway: the egress address toward local pods
	client      netip.Addr // outside the cluster
	pod         netip.Addr // a client pod on this node

	svcA  netip.Addr       // ClusterIP, tcp 80, NodePort 30080, three endpoints
	epsA  []netip.AddrPort // two local, one remote
	svcB  netip.Addr       // ClusterIP, udp and tcp 53, no endpoints: reject
	lbC   netip.Addr       // LoadBalancer, tcp 443, source ranges allowedC
	allow netip.Prefix
	deny  netip.Addr // a client outside allowedC
	epC   netip.AddrPort
	lbE   netip.Addr       // LoadBalancer, tcp 80, externalTrafficPolicy Local, no local endpoint: drop
	svcD  netip.Addr       // ClusterIP, tcp 80, ClientIP affinity 3h, two endpoints
	epsD  []netip.AddrPort // one local, one remote
}

const (
	nodePortA = 30080
	affinityD = 3 * time.Hour
)

var (
	mustA  = netip.MustParseAddr
	mustAP = netip.MustParseAddrPort
	mustP  = netip.MustParsePrefix
)

func fixtureAddrs(f ipfamily.Family) addrs {
	if f == ipfamily.IPv6 {
		return addrs{
			fam:         ipfamily.IPv6,
			clusterCIDR: mustP("fd00:192:168::/56"), localPods: mustP("fd00:192:168:1::/64"), loopback: mustP("::1/128"), lo: mustA("::1"),
			node: mustA("fd00:26:236::177"), otherNode: mustA("fd00:26:236::178"),
			bridge: mustA("fd00:192:168:1::1"), client: mustA("fd00:26:236::10"), pod: mustA("fd00:192:168:1::20"),
			svcA: mustA("fd00:96::50"),
			epsA: []netip.AddrPort{mustAP("[fd00:192:168:1::10]:8080"), mustAP("[fd00:192:168:1::11]:8080"), mustAP("[fd00:192:168:2::10]:8080")},
			svcB: mustA("fd00:96::60"),
			lbC:  mustA("fd00:26:236::180"), allow: mustP("2001:db8:1::/64"), deny: mustA("2001:db8:2::7"),
			epC:  mustAP("[fd00:192:168:2::20]:8443"),
			lbE:  mustA("fd00:26:236::181"),
			svcD: mustA("fd00:96::70"),
			epsD: []netip.AddrPort{mustAP("[fd00:192:168:1::30]:80"), mustAP("[fd00:192:168:2::30]:80")},
		}
	}
	return addrs{
		fam:         ipfamily.IPv4,
		clusterCIDR: mustP("192.168.0.0/16"), localPods: mustP("192.168.1.0/24"), loopback: mustP("127.0.0.0/8"), lo: mustA("127.0.0.1"),
		node: mustA("172.26.236.177"), otherNode: mustA("172.26.236.178"),
		bridge: mustA("192.168.1.1"), client: mustA("172.26.236.10"), pod: mustA("192.168.1.20"),
		svcA: mustA("10.96.0.50"),
		epsA: []netip.AddrPort{mustAP("192.168.1.10:8080"), mustAP("192.168.1.11:8080"), mustAP("192.168.2.10:8080")},
		svcB: mustA("10.96.0.60"),
		lbC:  mustA("172.26.236.180"), allow: mustP("203.0.113.0/24"), deny: mustA("198.51.100.7"),
		epC:  mustAP("192.168.2.20:8443"),
		lbE:  mustA("172.26.236.181"),
		svcD: mustA("10.96.0.70"),
		epsD: []netip.AddrPort{mustAP("192.168.1.30:80"), mustAP("192.168.2.30:80")},
	}
}

// nodeContext is the fixture node: the packet is seen at path; masquerade
// leaves toward local pods with the bridge address, else with the node's.
func (a addrs) nodeContext(path Path, rand func(uint32) uint32) Context {
	return Context{
		LocalAddrs: []netip.Addr{a.node, a.bridge},
		Path:       path,
		EgressAddr: func(dst netip.Addr) netip.Addr {
			if a.localPods.Contains(dst) {
				return a.bridge
			}
			return a.node
		},
		Rand: rand,
	}
}

// seq returns a random source that returns vals in order, then 0.
func seq(vals ...uint32) func(uint32) uint32 {
	return func(uint32) uint32 {
		if len(vals) == 0 {
			return 0
		}
		v := vals[0]
		vals = vals[1:]
		return v
	}
}

func (a addrs) tcp(src, dst netip.AddrPort) Packet {
	return Packet{Family: a.fam, Proto: nft.ProtoTCP, Src: src, Dst: dst}
}

func ap(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

// proxyTable builds, through the fake kernel, a table shaped like the one a
// kube-proxy-nftables-like service proxy programs for the fixture cluster.
func proxyTable(t *testing.T, a addrs) *nft.Table {
	t.Helper()
	const (
		daddr, proto, dport, saddr = nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport, nft.FieldSaddr
		masqBit                    = 0x4000
	)
	dpp := []nft.Field{daddr, proto, dport}
	pp := []nft.Field{proto, dport}
	host := nft.Host
	tx := nft.NewTx(a.fam, "svcnet")
	tx.AddTable()
	for _, s := range []*nft.Set{
		{Name: "service-ips", Key: dpp, Verdict: true},
		{Name: "service-nodeports", Key: pp, Verdict: true},
		{Name: "no-endpoint-services", Key: dpp, Verdict: true},
		{Name: "no-endpoint-nodeports", Key: pp, Verdict: true},
		{Name: "firewall-ips", Key: dpp, Verdict: true},
		{Name: "affinity-d1", Key: []nft.Field{saddr}, Timeout: affinityD},
		{Name: "affinity-d2", Key: []nft.Field{saddr}, Timeout: affinityD},
	} {
		tx.AddSet(s)
	}
	for _, c := range []*nft.Chain{
		{Name: "filter-prerouting", Hook: &nft.Hook{Type: "filter", Hook: "prerouting", Priority: -110}},
		{Name: "filter-input", Hook: &nft.Hook{Type: "filter", Hook: "input", Priority: -110}},
		{Name: "filter-forward", Hook: &nft.Hook{Type: "filter", Hook: "forward", Priority: -110}},
		{Name: "filter-output", Hook: &nft.Hook{Type: "filter", Hook: "output", Priority: -110}},
		{Name: "nat-prerouting", Hook: &nft.Hook{Type: "nat", Hook: "prerouting", Priority: -100}},
		{Name: "nat-output", Hook: &nft.Hook{Type: "nat", Hook: "output", Priority: -100}},
		{Name: "nat-postrouting", Hook: &nft.Hook{Type: "nat", Hook: "postrouting", Priority: 100}},
	} {
		tx.AddChain(c)
	}
	for _, n := range []string{
		"services", "firewall-check", "service-endpoints-check", "nodeport-endpoints-check", "reject-chain",
		"masquerading", "mark-for-masquerade",
		"service-a", "external-a", "endpoint-a1", "endpoint-a2", "endpoint-a3",
		"firewall-c", "external-c", "service-c", "endpoint-c1",
		"service-d", "endpoint-d1", "endpoint-d2",
	} {
		tx.AddChain(&nft.Chain{Name: n})
	}
	ctNew := nft.CtStateMatch{States: nft.CtNew}
	rules := map[string][]*nft.Rule{
		"filter-prerouting": {nft.R(ctNew, nft.JumpTo("firewall-check"))},
		"filter-input": {
			nft.R(ctNew, nft.JumpTo("nodeport-endpoints-check")),
			nft.R(ctNew, nft.JumpTo("service-endpoints-check")),
		},
		"filter-forward": {nft.R(ctNew, nft.JumpTo("service-endpoints-check"))},
		"filter-output": {
			nft.R(ctNew, nft.JumpTo("service-endpoints-check")),
			nft.R(ctNew, nft.JumpTo("firewall-check")),
		},
		"nat-prerouting":  {nft.R(nft.JumpTo("services"))},
		"nat-output":      {nft.R(nft.JumpTo("services"))},
		"nat-postrouting": {nft.R(nft.JumpTo("masquerading"))},
		"services": {
			nft.R(nft.VMap{Fields: dpp, Map: "service-ips"}),
			nft.R(nft.FibLocal{}, nft.AddrMatch{Field: daddr, Neq: true, Prefix: a.loopback}, nft.VMap{Fields: pp, Map: "service-nodeports"}),
		},
		"firewall-check":           {nft.R(nft.VMap{Fields: dpp, Map: "firewall-ips"})},
		"service-endpoints-check":  {nft.R(nft.VMap{Fields: dpp, Map: "no-endpoint-services"})},
		"nodeport-endpoints-check": {nft.R(nft.AddrMatch{Field: daddr, Neq: true, Prefix: a.loopback}, nft.VMap{Fields: pp, Map: "no-endpoint-nodeports"})},
		"reject-chain": {
			nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.Reject{TCPReset: true}),
			nft.R(nft.Reject{}),
		},
		"masquerading": {
			nft.R(nft.MarkMatch{Mask: masqBit, Value: 0}, nft.Verdict{Kind: nft.Return}),
			nft.R(nft.SetMark{Op: nft.MarkXor, Value: masqBit}),
			nft.R(nft.Masquerade{FullyRandom: true}),
		},
		"mark-for-masquerade": {nft.R(nft.SetMark{Op: nft.MarkOr, Value: masqBit})},
		"service-a": {
			nft.R(nft.Daddr(host(a.svcA)), nft.PortMatch{Field: dport, Port: 80}, nft.AddrMatch{Field: saddr, Neq: true, Prefix: a.clusterCIDR}, nft.JumpTo("mark-for-masquerade")),
			nft.R(nft.Random{Mod: 3, Value: 0}, nft.GotoTo("endpoint-a1")),
			nft.R(nft.Random{Mod: 2, Value: 0}, nft.GotoTo("endpoint-a2")),
			nft.R(nft.GotoTo("endpoint-a3")),
		},
		"external-a": {nft.R(nft.JumpTo("mark-for-masquerade")), nft.R(nft.GotoTo("service-a"))},
		"firewall-c": {nft.R(nft.AddrMatch{Field: saddr, Neq: true, Prefix: a.allow}, nft.Verdict{Kind: nft.Drop})},
		"external-c": {nft.R(nft.JumpTo("mark-for-masquerade")), nft.R(nft.GotoTo("service-c"))},
		"service-c":  {nft.R(nft.GotoTo("endpoint-c1"))},
		"service-d": {
			nft.R(nft.Daddr(host(a.svcD)), nft.PortMatch{Field: dport, Port: 80}, nft.AddrMatch{Field: saddr, Neq: true, Prefix: a.clusterCIDR}, nft.JumpTo("mark-for-masquerade")),
			nft.R(nft.Lookup{Fields: []nft.Field{saddr}, Set: "affinity-d1"}, nft.GotoTo("endpoint-d1")),
			nft.R(nft.Lookup{Fields: []nft.Field{saddr}, Set: "affinity-d2"}, nft.GotoTo("endpoint-d2")),
			nft.R(nft.Random{Mod: 2, Value: 0}, nft.GotoTo("endpoint-d1")),
			nft.R(nft.GotoTo("endpoint-d2")),
		},
	}
	endpoint := func(ep netip.AddrPort, affinity string) []*nft.Rule {
		rs := []*nft.Rule{nft.R(nft.Saddr(host(ep.Addr())), nft.JumpTo("mark-for-masquerade"))}
		if affinity != "" {
			rs = append(rs, nft.R(nft.Update{Set: affinity, Fields: []nft.Field{saddr}}))
		}
		return append(rs, nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.Counter{}, nft.DNAT{To: ep}).WithComment("endpoint "+ep.String()))
	}
	rules["endpoint-a1"] = endpoint(a.epsA[0], "")
	rules["endpoint-a2"] = endpoint(a.epsA[1], "")
	rules["endpoint-a3"] = endpoint(a.epsA[2], "")
	rules["endpoint-c1"] = endpoint(a.epC, "")
	rules["endpoint-d1"] = endpoint(a.epsD[0], "affinity-d1")
	rules["endpoint-d2"] = endpoint(a.epsD[1], "affinity-d2")
	for _, n := range slices.Sorted(maps.Keys(rules)) {
		for _, r := range rules[n] {
			tx.AddRule(n, r)
		}
	}
	el := func(key []nft.Value, v nft.Verdict) nft.Element { return nft.Element{Key: key, Verdict: &v} }
	tcp, udp := nft.N(nft.ProtoTCP), nft.N(nft.ProtoUDP)
	tx.AddElements("service-ips",
		el([]nft.Value{nft.A(a.svcA), tcp, nft.N(80)}, nft.GotoTo("service-a")),
		el([]nft.Value{nft.A(a.lbC), tcp, nft.N(443)}, nft.GotoTo("external-c")),
		el([]nft.Value{nft.A(a.svcD), tcp, nft.N(80)}, nft.GotoTo("service-d")),
	)
	tx.AddElements("service-nodeports", el([]nft.Value{tcp, nft.N(nodePortA)}, nft.GotoTo("external-a")))
	tx.AddElements("no-endpoint-services",
		el([]nft.Value{nft.A(a.svcB), udp, nft.N(53)}, nft.GotoTo("reject-chain")),
		el([]nft.Value{nft.A(a.svcB), tcp, nft.N(53)}, nft.GotoTo("reject-chain")),
		el([]nft.Value{nft.A(a.lbE), tcp, nft.N(80)}, nft.Verdict{Kind: nft.Drop}),
	)
	tx.AddElements("firewall-ips", el([]nft.Value{nft.A(a.lbC), tcp, nft.N(443)}, nft.GotoTo("firewall-c")))

	k := nft.NewFake()
	ctx := context.Background()
	if err := k.Apply(ctx, tx); err != nil {
		t.Fatalf("apply fixture table: %v", err)
	}
	tbl, err := k.Read(ctx, a.fam, "svcnet")
	if err != nil {
		t.Fatalf("read fixture table: %v", err)
	}
	return tbl
}

package hostport

import (
	"context"
	"net/netip"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// Examples returns the part of nft's expression checklist that hostport
// tables use (nft.ExamplesFor a table of each family holding the skeleton
// and the objects of mappings with and without a host address).
func Examples() []nft.Example {
	var ts []*nft.Table
	for _, f := range families {
		t := Skeleton(f)
		pod := netip.MustParseAddr("192.168.1.2")
		host := netip.MustParseAddr("172.26.236.177")
		if f == ipfamily.IPv6 {
			pod, host = netip.MustParseAddr("fd00:192:168:1::2"), netip.MustParseAddr("fd00:26:236::177")
		}
		obj := Desired(f, Owner{Network: "probe", ContainerID: "probe", IfName: "eth0"}, pod, []Mapping{
			{HostPort: 8080, Protocol: nft.ProtoTCP, ContainerPort: 80},
			{HostIP: host, HostPort: 8443, Protocol: nft.ProtoTCP, ContainerPort: 443},
		})
		t.Chains[obj.DNAT.Name], t.Chains[obj.Masq.Name] = obj.DNAT, obj.Masq
		ts = append(ts, t)
	}
	return nft.ExamplesFor(ts...)
}

// Probe checks that the kernel loads every expression kind hostport rules
// use, in tables of each of fams (nft.Probe: a scratch table per family,
// committed and deleted). A missing feature is an error wrapping
// nft.ErrNotSupported that names it.
func (m *Manager) Probe(ctx context.Context, fams []ipfamily.Family) error {
	return nft.Probe(ctx, m.conn, fams, Examples())
}

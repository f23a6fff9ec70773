package proxy

import (
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/model"
)

// nodePortAddresses resolves --nodeport-addresses: "primary" means the Node
// object's IPs (InternalIP, then ExternalIP; all of them, so a dual-stack node
// serves both families), falling back to the interface addresses when the Node
// is unknown; CIDRs select the interface addresses inside them. Loopback
// addresses are never returned (CVE-2020-8558). The result is sorted.
func nodePortAddresses(spec []string, node *model.Node, ifaddrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	add := func(a netip.Addr) {
		a = a.Unmap()
		if a.IsLoopback() || a.IsLinkLocalUnicast() || slices.Contains(out, a) {
			return
		}
		out = append(out, a)
	}
	if len(spec) == 1 && spec[0] == "primary" {
		if node != nil && len(node.IPs()) > 0 {
			for _, a := range node.IPs() {
				add(a)
			}
		} else {
			for _, a := range ifaddrs {
				add(a)
			}
		}
	} else {
		for _, s := range spec {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				continue // Validate rejects these before
			}
			for _, a := range ifaddrs {
				if p.Contains(a.Unmap()) {
					add(a)
				}
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

package servicetable

import (
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// normalizeNode returns a copy of cfg, sharing no slice with it, whose
// NodePortAddresses are cleaned by nodePortAddrs. It is idempotent.
func normalizeNode(cfg NodeConfig) NodeConfig {
	cfg.NodePortAddresses = nodePortAddrs(cfg.NodePortAddresses)
	cfg.ClusterCIDRs = slices.Clone(cfg.ClusterCIDRs)
	cfg.Egress = cfg.Egress.clone()
	return cfg
}

// nodePortAddrs returns the addresses unmapped, without invalid, unspecified,
// loopback (CVE-2020-8558) and multicast ones, sorted and deduplicated, in a
// new slice (nil when none is left).
func nodePortAddrs(in []netip.Addr) []netip.Addr {
	var addrs []netip.Addr
	for _, a := range in {
		a = a.Unmap()
		if !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() {
			continue
		}
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs)
}

// special reports whether a is no address a Service may capture: invalid,
// unspecified, loopback, link-local or multicast (the addresses the apiserver
// refuses as externalIPs).
func special(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast()
}

// clusterIPOf returns the Service's first clusterIP of family fam, as kube-proxy's
// GetClusterIPByFamily.
func clusterIPOf(svc *model.Service, fam ipfamily.Family) (netip.Addr, bool) {
	for _, a := range svc.ClusterIPs {
		if a = a.Unmap(); ipfamily.Of(a) == fam {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// familyAddresses are the addresses of one Service in one family, shared by
// all its ports' entries (the slices are never modified after building).
type familyAddresses struct {
	externalIPs   []netip.Addr
	lbIPs         []netip.Addr
	sourceRanges  []netip.Prefix
	nodePortAddrs []netip.Addr
}

// familyAddrs picks the Service's externalIPs, VIP-mode LB ingress IPs and
// source ranges of family fam, and the node-port addresses of fam. cfg's
// NodePortAddresses must be cleaned (nodePortAddrs).
func familyAddrs(svc *model.Service, cfg NodeConfig, fam ipfamily.Family) familyAddresses {
	var fa familyAddresses
	for _, a := range svc.ExternalIPs {
		if a = a.Unmap(); ipfamily.Of(a) == fam {
			fa.externalIPs = append(fa.externalIPs, a)
		}
	}
	for _, ing := range svc.LoadBalancerIngress {
		// kube-proxy's IsVIPMode: unset or VIP. Proxy (or an unknown mode) means
		// the load balancer delivers to the node; capturing its IP would break it.
		if !ing.IP.IsValid() || ing.IPMode != model.IPModeVIP && ing.IPMode != "" {
			continue
		}
		if a := ing.IP.Unmap(); ipfamily.Of(a) == fam {
			fa.lbIPs = append(fa.lbIPs, a)
		}
	}
	for _, p := range svc.LoadBalancerSourceRanges {
		if !p.IsValid() {
			continue
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		if prefixFamily(p) != fam {
			continue
		}
		if p.Bits() == 0 {
			// A zero-length prefix allows everyone: the same as no ranges.
			fa.sourceRanges = nil
			break
		}
		fa.sourceRanges = append(fa.sourceRanges, p)
	}
	for _, a := range cfg.NodePortAddresses {
		if ipfamily.Of(a) == fam {
			fa.nodePortAddrs = append(fa.nodePortAddrs, a)
		}
	}
	fa.externalIPs = sortedAddrs(fa.externalIPs)
	fa.lbIPs = sortedAddrs(fa.lbIPs)
	slices.SortFunc(fa.sourceRanges, comparePrefixes)
	fa.sourceRanges = slices.Compact(fa.sourceRanges)
	return fa
}

// prefixFamily is the family of a prefix whose address is already unmapped
// (a mapped prefix shorter than /96 stays ipfamily.IPv6).
func prefixFamily(p netip.Prefix) ipfamily.Family {
	if p.Addr().Is4() {
		return ipfamily.IPv4
	}
	return ipfamily.IPv6
}

func sortedAddrs(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, netip.Addr.Compare)
	return slices.Compact(a)
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// frontends lists the entry's frontends in the documented order, each
// (address, port) once.
func frontends(sp *ServicePort, nodePortAddrs []netip.Addr) []Frontend {
	n := 1 + len(sp.ExternalIPs) + len(sp.LoadBalancerIPs)
	if sp.NodePort != 0 {
		n += len(nodePortAddrs)
	}
	out := make([]Frontend, 0, n)
	add := func(k FrontendKind, a netip.Addr, port uint16) {
		for _, f := range out {
			if f.Addr == a && f.Port == port {
				return
			}
		}
		out = append(out, Frontend{Kind: k, Addr: a, Port: port})
	}
	add(FrontendClusterIP, sp.ClusterIP, sp.Port)
	for _, a := range sp.ExternalIPs {
		add(FrontendExternalIP, a, sp.Port)
	}
	for _, a := range sp.LoadBalancerIPs {
		add(FrontendLoadBalancer, a, sp.Port)
	}
	if sp.NodePort != 0 {
		for _, a := range nodePortAddrs {
			add(FrontendNodePort, a, sp.NodePort)
		}
	}
	return out
}

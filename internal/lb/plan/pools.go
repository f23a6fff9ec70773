package plan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// admitPools parses in's pools and admits them (pool.Admit) against the
// cluster's own addresses; it fills out's pool results and errors and returns
// the admitted pools.
func admitPools(in Input, out *Output) []alloc.Pool {
	sorted := slices.DeleteFunc(slices.Clone(in.Pools), func(p *pool.IPAddressPool) bool { return p == nil })
	slices.SortStableFunc(sorted, func(a, b *pool.IPAddressPool) int { return cmp.Compare(a.Name, b.Name) })
	sorted = slices.CompactFunc(sorted, func(a, b *pool.IPAddressPool) bool { return a.Name == b.Name })
	established := in.Established
	if established == nil {
		established = func(p *pool.IPAddressPool, _ alloc.Pool) bool { return pool.StatusAdmitted(p) }
	}
	results := map[string]*PoolResult{}
	var cands []pool.Candidate
	for _, p := range sorted {
		r := &PoolResult{Name: p.Name}
		results[p.Name] = r
		ap, err := pool.Parse(p)
		if err != nil {
			r.Err = err
			continue
		}
		cands = append(cands, pool.Candidate{Pool: ap, Established: established(p, ap), Created: p.CreationTimestamp.Time})
	}
	adm := pool.Admit(cands, reservedAddresses(in.Nodes, in.ServiceCIDRs))
	for _, p := range adm.Pools {
		results[p.Name].Admitted, results[p.Name].Pool = true, p
	}
	for _, err := range adm.Refused {
		results[err.(*pool.Error).Pool].Err = err
	}
	for _, err := range adm.Conflicts {
		results[err.(*pool.Error).Pool].Conflict = err
	}
	for _, p := range sorted {
		r := results[p.Name]
		out.Pools = append(out.Pools, *r)
		if r.Err != nil {
			out.PoolErrors = append(out.PoolErrors, r.Err)
		}
		if r.Conflict != nil {
			out.PoolConflicts = append(out.PoolConflicts, r.Conflict)
		}
	}
	return adm.Pools
}

// reservedAddresses returns the cluster's own addresses, which no pool may
// hand out: every Node's InternalIP and ExternalIP addresses and pod CIDRs
// (spec.podCIDR and spec.podCIDRs), whatever its readiness, and the service
// CIDRs. Unparsable entries are skipped (the apiserver validates them).
func reservedAddresses(nodes []*corev1.Node, serviceCIDRs []netip.Prefix) []alloc.Reserved {
	var out []alloc.Reserved
	for _, n := range nodes {
		if n == nil {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			out = append(out, alloc.Reserved{Range: alloc.Range{First: ip, Last: ip},
				What: fmt.Sprintf("Node %s's %s %s", n.Name, a.Type, ip)})
		}
		for _, c := range append([]string{n.Spec.PodCIDR}, n.Spec.PodCIDRs...) {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, alloc.Reserved{Range: alloc.PrefixRange(p), What: fmt.Sprintf("Node %s's podCIDR %s", n.Name, p.Masked())})
			}
		}
	}
	for _, p := range serviceCIDRs {
		out = append(out, alloc.Reserved{Range: alloc.PrefixRange(p), What: "the service CIDR " + p.Masked().String()})
	}
	slices.SortFunc(out, func(a, b alloc.Reserved) int {
		return cmp.Or(a.Range.First.Compare(b.Range.First), a.Range.Last.Compare(b.Range.Last), cmp.Compare(a.What, b.What))
	})
	return slices.Compact(out)
}

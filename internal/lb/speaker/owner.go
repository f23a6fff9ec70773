package speaker

import (
	"bytes"
	"crypto/sha256"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/model"
)

// claim is what the cluster asks of one LoadBalancer IP.
type claim struct {
	// services announce the IP, sorted by key.
	services []model.ServiceKey
	// eligible are the nodes that may answer for it, sorted by name.
	eligible []string
	// owner is the one that does; "" when no node is eligible.
	owner string
}

// Owners returns, for every IP this node's speakers must announce, the node that
// answers for it: the eligible node (see the package doc) with the smallest
// sha256(name + "#" + ip.String()), ties broken by name. IPs without an eligible
// node are absent. alive is the set of nodes whose speaker is alive
// (members.Alive); nil counts every node as alive. Only cfg.Class and
// cfg.IsDefault are read ("" Class means plan.DefaultClass). Pure and
// deterministic.
func Owners(cfg Config, snap *model.Snapshot, alive map[string]bool) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for ip, c := range claims(cfg, snap, alive) {
		if c.owner != "" {
			out[ip] = c.owner
		}
	}
	return out
}

// claims computes every announced IP's services, eligible nodes and owner.
func claims(cfg Config, snap *model.Snapshot, alive map[string]bool) map[netip.Addr]*claim {
	ours := plan.Config{Class: cfg.Class, IsDefault: cfg.IsDefault}
	nodeAddrs := map[netip.Addr]bool{}
	var candidates []string // sorted: snap.Nodes is
	for _, n := range snap.Nodes() {
		for _, a := range n.IPs() {
			nodeAddrs[a.Unmap()] = true
		}
		if _, excluded := n.Labels[corev1.LabelNodeExcludeBalancers]; n.Ready && !excluded && (alive == nil || alive[n.Name]) {
			candidates = append(candidates, n.Name)
		}
	}
	out := map[netip.Addr]*claim{}
	eligible := map[netip.Addr]map[string]bool{}
	for st := range snap.EachLoadBalancer() {
		svc := st.Service
		if !ours.Ours(svc.LoadBalancerClass) {
			continue
		}
		local := svc.ExternalTrafficPolicy == model.TrafficPolicyLocal
		for _, ing := range svc.LoadBalancerIngress {
			ip := ing.IP.Unmap()
			if !ip.IsValid() || (ing.IPMode != "" && ing.IPMode != model.IPModeVIP) || nodeAddrs[ip] {
				continue
			}
			c := out[ip]
			if c == nil {
				c = &claim{}
				out[ip] = c
				eligible[ip] = map[string]bool{}
			}
			if !slices.Contains(c.services, svc.Key()) {
				c.services = append(c.services, svc.Key())
			}
			var ready map[string]bool
			if local {
				ready = readyNodes(st, ipfamily.Of(ip))
			}
			for _, n := range candidates {
				if !local || ready[n] {
					eligible[ip][n] = true
				}
			}
		}
	}
	for ip, c := range out {
		slices.SortFunc(c.services, model.CompareServiceKeys)
		for _, n := range candidates {
			if eligible[ip][n] {
				c.eligible = append(c.eligible, n)
			}
		}
		c.owner = pick(c.eligible, ip)
	}
	return out
}

// readyNodes returns the nodes that hold a ready endpoint of st with an address
// of family fam (any port): where externalTrafficPolicy Local delivers traffic
// for an IP of that family.
func readyNodes(st *model.ServiceState, fam ipfamily.Family) map[string]bool {
	out := map[string]bool{}
	for _, sl := range st.Slices {
		for i := range sl.Endpoints {
			ep := &sl.Endpoints[i]
			if !ep.Ready || ep.NodeName == "" {
				continue
			}
			if slices.ContainsFunc(ep.Addresses, func(a netip.Addr) bool { return ipfamily.Of(a) == fam }) {
				out[ep.NodeName] = true
			}
		}
	}
	return out
}

// pick returns the node with the smallest sha256(name + "#" + ip), ties by
// name; "" for none.
func pick(nodes []string, ip netip.Addr) string {
	best := ""
	var bestSum [sha256.Size]byte
	for _, n := range nodes {
		sum := sha256.Sum256([]byte(n + "#" + ip.String()))
		if c := bytes.Compare(sum[:], bestSum[:]); best == "" || c < 0 || (c == 0 && n < best) {
			best, bestSum = n, sum
		}
	}
	return best
}

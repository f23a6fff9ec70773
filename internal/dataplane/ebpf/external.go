package ebpf

import (
	"net/netip"

	"github.com/svcnet/svcnet/internal/ebpf/socklb"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Reasons the tc load balancer leaves a frontend's traffic from outside the
// node to the nftables rules.
const (
	// leftExtNoEndpoints: the rules reject (no endpoint in the cluster) or
	// drop (none under externalTrafficPolicy Local on this node), which
	// they do with ICMP or a TCP reset as kube-proxy.
	leftExtNoEndpoints = "no endpoint for traffic from outside under the external traffic policy: the nftables rules reject or drop it"
	// leftExtAffinity: ClientIP affinity keyed by the client's address is
	// the rules' (the tc programs choose at random per connection).
	leftExtAffinity = "ClientIP affinity of traffic from outside is kept by the nftables rules"
)

// external is what the tc load balancer does for one frontend with traffic
// from outside the node: new connections go to one of Backends (Local per
// backend: it runs on this node); LocalPolicy is externalTrafficPolicy
// Local.
type external struct {
	Local       []bool
	LocalPolicy bool
	// Maglev chooses by the flow's hash in a Maglev table (else at
	// random).
	Maglev bool
}

// Maglev is the scheduler (model.SchedulerAnnotation, --ebpf-scheduler)
// that chooses the backend of a connection from outside the node by
// Maglev consistent hashing of its flow (the tc load balancer), the same
// on every node; connects on the node choose at random.
const Maglev socklb.Scheduler = "maglev"

// externalEntries returns what the tc load balancer does for the frontends
// of sp that take traffic from outside the node (its NodePorts on this
// node's addresses, externalIPs and LB IPs), and those it leaves to the
// nftables rules, with why: SCTP, LB IPs with loadBalancerSourceRanges,
// ClientIP affinity, and a policy with no endpoint for the traffic. The
// endpoints are the external policy's: LocalEndpoints under Local, else
// ClusterEndpoints.
func externalEntries(sp *servicetable.ServicePort) (entries []entry, left []leftOut) {
	eps := sp.ClusterEndpoints
	if sp.ExternalPolicyLocal {
		eps = sp.LocalEndpoints
	}
	for _, f := range sp.Frontends {
		if f.Kind == servicetable.FrontendClusterIP {
			continue
		}
		switch {
		case sp.Protocol == model.ProtocolSCTP:
			left = append(left, leftOut{f, leftSCTP})
			continue
		case f.Kind == servicetable.FrontendLoadBalancer && len(sp.SourceRanges) > 0:
			left = append(left, leftOut{f, leftSourceRanges})
			continue
		case sp.AffinityTimeout > 0:
			left = append(left, leftOut{f, leftExtAffinity})
			continue
		case len(eps) == 0:
			left = append(left, leftOut{f, leftExtNoEndpoints})
			continue
		}
		e := entry{Frontend: netip.AddrPortFrom(f.Addr, f.Port), Protocol: sp.Protocol,
			External: &external{LocalPolicy: sp.ExternalPolicyLocal}}
		for _, ep := range eps {
			e.Backends = append(e.Backends, netip.AddrPortFrom(ep.Addr, ep.Port))
			e.External.Local = append(e.External.Local, ep.Local)
		}
		entries = append(entries, e)
	}
	return entries, left
}

// External is what the tc load balancer of the node whose service table
// holds sp does with a new connection from outside the node to frontend:
// Held, it sends it to one of Backends at random (a Local one keeps the
// client's address; another is reached from the node's address, SNAT), and
// keeps it there; not Held, the nftables rules decide and Left says why.
// Maglev is not decided here: it is the plane's scheduler or the port's.
type External struct {
	Held        bool
	Backends    []netip.AddrPort
	Local       []bool
	LocalPolicy bool
	Left        string
}

// ExternalFor returns what the tc load balancer does with traffic from
// outside the node to frontend, one of sp's frontends other than its
// ClusterIP (ok false when it is none of them). It is externalEntries'
// answer, for readers of the plane (the tracer).
func ExternalFor(sp *servicetable.ServicePort, frontend netip.AddrPort) (x External, ok bool) {
	entries, left := externalEntries(sp)
	for _, e := range entries {
		if e.Frontend == frontend {
			return External{Held: true, Backends: e.Backends, Local: e.External.Local, LocalPolicy: e.External.LocalPolicy}, true
		}
	}
	for _, l := range left {
		if netip.AddrPortFrom(l.Frontend.Addr, l.Frontend.Port) == frontend {
			return External{Left: l.Reason}, true
		}
	}
	return External{}, false
}

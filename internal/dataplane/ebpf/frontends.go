package ebpf

import (
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// entry is what the socket load balancer does for one frontend: translate a
// connect to one of Backends, or refuse it (Backends empty).
type entry struct {
	Frontend netip.AddrPort
	Protocol model.Protocol
	Backends []netip.AddrPort
	// Policy is how a backend is chosen: the port's affinity, and its
	// scheduler ("" until the plane applies its default).
	Policy socklb.Policy
	// External is set for an entry of the tc load balancer (traffic from
	// outside the node), whose backends are never empty.
	External *external
}

// key identifies an entry in the socket load balancer.
type key struct {
	Frontend netip.AddrPort
	Protocol model.Protocol
}

func (e entry) key() key { return key{e.Frontend, e.Protocol} }

// equal reports whether e and o do the same.
func (e entry) equal(o entry) bool {
	if e.key() != o.key() || e.Policy != o.Policy || len(e.Backends) != len(o.Backends) || (e.External == nil) != (o.External == nil) {
		return false
	}
	if e.External != nil && (e.External.LocalPolicy != o.External.LocalPolicy || e.External.Maglev != o.External.Maglev ||
		!slices.Equal(e.External.Local, o.External.Local)) {
		return false
	}
	for i := range e.Backends {
		if e.Backends[i] != o.Backends[i] {
			return false
		}
	}
	return true
}

// LeftConnectedUDP is why a UDP socket's connect meets the nftables rules
// although its frontend is in the maps (for the datagrams of unconnected
// sockets, translated at sendmsg).
const LeftConnectedUDP = "a UDP socket's connect is left alone: a connected socket keeps its peer for its life, " +
	"so it would keep an endpoint that is gone; its flow is conntrack's, which the proxy clears when the endpoint goes " +
	"(an unconnected socket's datagrams are translated at sendmsg)"

// Left-to-nftables reasons: why a Service port's frontends are not in the
// socket load balancer, so that a connect to them meets the nftables rules
// (which then decide) instead.
const (
	// leftDrop: the port has endpoints, but none for this traffic's
	// policy: kube-proxy drops such traffic (the client times out), which a
	// connect program cannot do but the nftables rules do.
	leftDrop = "no endpoint for this node's traffic under the traffic policy: dropped by the nftables rules"
	// leftSourceRanges: loadBalancerSourceRanges filter by the client's
	// address, which the nftables firewall chain checks.
	leftSourceRanges = "loadBalancerSourceRanges are checked by the nftables rules"
	// leftSCTP: an SCTP association may name several peer addresses
	// (sctp_connectx) that one connect translation does not cover.
	leftSCTP = "SCTP associations are translated by the nftables rules"
)

// leftOut is a frontend the socket load balancer leaves to the nftables
// rules, and why.
type leftOut struct {
	Frontend servicetable.Frontend
	Reason   string
}

// socketEntries returns what the socket load balancer does for the frontends
// of sp when a socket on this node (a pod's or the node's own) connects to
// them, and the frontends it leaves to the nftables rules, with why.
//
// Traffic that connects on this node is internal to the cluster: to the
// ClusterIP it goes to the endpoints of the internal traffic policy
// (LocalEndpoints under Local, else ClusterEndpoints); to an externalIP, LB
// IP or this node's NodePort it goes to ClusterEndpoints whatever the
// external policy, as kube-proxy short-circuits traffic from pods and from
// the node itself. With no usable endpoint anywhere the connect is refused
// (kube-proxy's reject). ClientIP affinity keeps a client (a pod, or the
// node: a socket's network namespace, where kube-proxy keys on the source
// address) on its endpoint for the port's timeout. NodePort frontends are served only on the node's
// NodePort addresses (never loopback), as in the nftables rules.
func socketEntries(sp *servicetable.ServicePort) (entries []entry, left []leftOut) {
	for _, f := range sp.Frontends {
		eps := sp.ClusterEndpoints
		if f.Kind == servicetable.FrontendClusterIP && sp.InternalPolicyLocal {
			eps = sp.LocalEndpoints
		}
		switch {
		case sp.Protocol == model.ProtocolSCTP:
			left = append(left, leftOut{f, leftSCTP})
			continue
		case sp.HasEndpoints && len(eps) == 0:
			left = append(left, leftOut{f, leftDrop})
			continue
		case f.Kind == servicetable.FrontendLoadBalancer && len(sp.SourceRanges) > 0:
			left = append(left, leftOut{f, leftSourceRanges})
			continue
		}
		e := entry{Frontend: netip.AddrPortFrom(f.Addr, f.Port), Protocol: sp.Protocol,
			Policy: socklb.Policy{Scheduler: socklb.Scheduler(sp.Scheduler), Affinity: sp.AffinityTimeout}}
		if sp.HasEndpoints {
			e.Backends = make([]netip.AddrPort, len(eps))
			for i, ep := range eps {
				e.Backends[i] = netip.AddrPortFrom(ep.Addr, ep.Port)
			}
		}
		entries = append(entries, e)
	}
	return entries, left
}

// Socket is what the socket load balancer does for a connect on the node to
// one frontend: Held, it translates the connect to one of Backends chosen
// by Policy (under affinity, a client's connects within its timeout keep
// the last one's), or refuses it with ECONNREFUSED when Backends is
// empty; not Held, it leaves the connect untouched and Left says why the
// nftables rules decide instead.
type Socket struct {
	Held     bool
	Backends []netip.AddrPort
	// Policy is the port's: its scheduler ("": the proxy's
	// --ebpf-scheduler) and affinity.
	Policy socklb.Policy
	Left   string
}

// SocketFor returns what the socket load balancer of the node whose service
// table holds sp does for a connect to frontend, one of sp's frontends (ok
// false when it is none of them). It is socketEntries' answer, for readers
// of the plane (the tracer).
func SocketFor(sp *servicetable.ServicePort, frontend netip.AddrPort) (s Socket, ok bool) {
	entries, left := socketEntries(sp)
	for _, e := range entries {
		if e.Frontend == frontend {
			return Socket{Held: true, Backends: e.Backends, Policy: e.Policy}, true
		}
	}
	for _, l := range left {
		if netip.AddrPortFrom(l.Frontend.Addr, l.Frontend.Port) == frontend {
			return Socket{Left: l.Reason}, true
		}
	}
	return Socket{}, false
}

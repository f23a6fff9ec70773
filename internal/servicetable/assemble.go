package servicetable

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// Assemble makes a table from entries built by BuildService with the same cfg
// and the SkipErrors that came with them. It sorts the entries by ID and
// family, drops every entry that loses a claim (below) with a SkipError naming
// the port, family and winner, and sorts the errors. It neither modifies nor
// copies the entries, and its result depends only on the set of entries and
// errors given, not on their order (of two entries with the same ID and family,
// which BuildService never returns, the first given is kept).
//
// Claims. Each entry claims what it would program on this node: every frontend
// (address, port, protocol); for a NodePort, (port, protocol) on the node as a
// whole; for a health check node port, (port, TCP) on the node and on every
// node-port address (the health server listens there). Two entries claiming the
// same thing cannot both be programmed. The claim is won by its strongest kind
// (ClusterIP, then NodePort or health check port, then externalIP or LB IP, so a
// Service cannot take another's ClusterIP through spec.externalIPs,
// CVE-2020-8554), then by the first entry by ID and family. An entry that loses
// any claim is dropped whole. A health check port is owned by its Service, so
// the entries of one Service sharing it do not conflict. Winners are decided in
// one pass over all entries: an entry keeps losing to a winner that itself lost
// another claim, which keeps the outcome simple to state and order-independent.
func Assemble(cfg NodeConfig, ports []*ServicePort, errs []*SkipError) *Table {
	type group struct {
		ports []*ServicePort
		errs  []*SkipError
	}
	groups := map[model.ServiceKey]*group{}
	get := func(k model.ServiceKey) *group {
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		return g
	}
	for _, sp := range ports {
		if sp != nil {
			g := get(model.ServiceKey{Namespace: sp.Name.Namespace, Name: sp.Name.Name})
			g.ports = append(g.ports, sp)
		}
	}
	for _, e := range errs {
		if e != nil {
			g := get(e.Service)
			g.errs = append(g.errs, e)
		}
	}
	a := NewAssembler(cfg)
	for k, g := range groups {
		a.Set(k, g.ports, g.errs...)
	}
	return a.Table()
}

// claimKey is something one entry can program on the node. addr is invalid for
// a claim on every node-port address at once (a NodePort, a health check port).
// (Fields ordered to keep it at 48 bytes: it keys a map entry per claim.)
type claimKey struct {
	proto model.Protocol
	addr  netip.Addr
	port  uint16
	fam   ipfamily.Family
}

func (k claimKey) String() string {
	p := strconv.Itoa(int(k.port)) + "/" + string(k.proto)
	if !k.addr.IsValid() {
		return p
	}
	return netip.AddrPortFrom(k.addr, k.port).String() + "/" + string(k.proto)
}

// claimRank orders the kinds of claim; the lower wins.
type claimRank uint8

const (
	rankClusterIP claimRank = iota
	rankNodePort            // NodePort and health check node port
	rankExternal            // externalIP and LB IP
)

// claimKind says what a claim is for, in messages: a frontend (the first four,
// in FrontendKind's order), the NodePort on the node as a whole, or a health
// check node port.
type claimKind uint8

const (
	claimClusterIP claimKind = iota
	claimExternalIP
	claimLoadBalancer
	claimNodePortFrontend
	claimNodePort
	claimHealthCheck
)

// frontendClaim is the kind of a claim on a frontend of kind k.
func frontendClaim(k FrontendKind) claimKind { return claimKind(k) }

func (k claimKind) String() string {
	return [...]string{"ClusterIP", "ExternalIP", "LoadBalancer", "NodePort", "NodePort", "HealthCheckNodePort"}[k]
}

// claim is one key an entry claims. An entry may hold a key only once, except
// a Service's claim (a health check port): every entry of the Service may
// hold that one.
type claim struct {
	key     claimKey
	rank    claimRank
	kind    claimKind
	service bool // the claim is the Service's, not the entry's
}

// entryOwner names an entry in messages.
func entryOwner(sp *ServicePort) string { return sp.ID + " (" + sp.Family.String() + ")" }

// claimsOf lists what sp claims; every key at most once.
func claimsOf(sp *ServicePort) []claim {
	n := len(sp.Frontends)
	if sp.NodePort != 0 {
		n++
	}
	if sp.HealthCheckNodePort != 0 {
		n++
		for _, f := range sp.Frontends {
			if f.Kind == FrontendNodePort {
				n++
			}
		}
	}
	// Sized exactly: the assembler keeps every entry's claims.
	out := make([]claim, 0, n)
	for _, f := range sp.Frontends {
		r := rankExternal
		switch f.Kind {
		case FrontendClusterIP:
			r = rankClusterIP
		case FrontendNodePort:
			r = rankNodePort
		}
		out = append(out, claim{key: claimKey{sp.Protocol, f.Addr, f.Port, sp.Family}, rank: r, kind: frontendClaim(f.Kind)})
	}
	if sp.NodePort != 0 {
		out = append(out, claim{key: claimKey{sp.Protocol, netip.Addr{}, sp.NodePort, sp.Family}, rank: rankNodePort, kind: claimNodePort})
	}
	if hc := sp.HealthCheckNodePort; hc != 0 {
		out = append(out, claim{key: claimKey{model.ProtocolTCP, netip.Addr{}, hc, sp.Family}, rank: rankNodePort, kind: claimHealthCheck, service: true})
		for _, f := range sp.Frontends {
			if f.Kind == FrontendNodePort {
				out = append(out, claim{key: claimKey{model.ProtocolTCP, f.Addr, hc, sp.Family}, rank: rankNodePort, kind: claimHealthCheck, service: true})
			}
		}
	}
	// Keep the first claim of each key: a key repeats only for an odd spec (a
	// health check port equal to the entry's own TCP node port).
	seen := make(map[claimKey]bool, len(out))
	return slices.DeleteFunc(out, func(c claim) bool {
		if seen[c.key] {
			return true
		}
		seen[c.key] = true
		return false
	})
}

func conflictError(sp *ServicePort, reason string) *SkipError {
	port := sp.ID
	if i := strings.LastIndexByte(port, ':'); i >= 0 {
		port = port[i+1:]
	}
	return &SkipError{
		Service:  model.ServiceKey{Namespace: sp.Name.Namespace, Name: sp.Name.Name},
		Port:     port,
		Family:   sp.Family,
		Conflict: true,
		Reason:   reason,
	}
}

func compareSkipErrors(a, b *SkipError) int {
	if c := cmp.Compare(a.Service.Namespace, b.Service.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Service.Name, b.Service.Name); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Family, b.Family); c != 0 {
		return c
	}
	return cmp.Compare(a.Reason, b.Reason)
}

package servicetable

import (
	"net/netip"
	"slices"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// NodeConfig is what the table needs to know about the node it is built for.
type NodeConfig struct {
	// NodeName is the node the table is for (endpoints with this NodeName are local).
	NodeName string
	// Zone is the node's topology zone ("" if none); used for zone hints and
	// trafficDistribution.
	Zone string
	// NodePortAddresses are the node addresses on which NodePorts are served,
	// already resolved (from --nodeport-addresses CIDRs or "primary"). Loopback
	// addresses are never included (CVE-2020-8558): Build drops them, and also
	// invalid, unspecified and multicast ones; the rest are unmapped, sorted
	// and deduplicated (Table.Node holds the cleaned list).
	NodePortAddresses []netip.Addr
	// ClusterCIDRs detect pod-originated traffic by its source address, at
	// most one prefix per family (kube-proxy's --detect-local-mode
	// ClusterCIDR with --cluster-cidr, or NodeCIDR with the Node's
	// spec.podCIDRs). Traffic to a ClusterIP from outside them is
	// masqueraded; externalTrafficPolicy Local short-circuits traffic from
	// inside them. A family with neither a prefix nor PodInterface has no
	// detection.
	ClusterCIDRs []netip.Prefix
	// PodInterface detects pod-originated traffic by the name of the
	// interface it arrives on instead, in every family (--detect-local-mode
	// BridgeInterface: the pods' bridge, --pod-bridge-interface; with
	// PodInterfacePrefix, InterfaceNamePrefix: any interface whose name
	// starts with it, --pod-interface-name-prefix). Set only when
	// ClusterCIDRs is empty.
	PodInterface       string
	PodInterfacePrefix bool
	// MasqueradeAll masquerades all traffic to ClusterIPs (--masquerade-all).
	MasqueradeAll bool
	// MasqueradeMark is the packet mark bit that asks for SNAT in
	// postrouting (--masquerade-bit B: 1<<B); 0 means DefaultMasqueradeMark.
	MasqueradeMark uint32
	// Egress is the egress masquerade of pod traffic leaving the cluster
	// (svcnet proxy --egress-masquerade); the zero value masquerades none.
	Egress EgressMasquerade
}

// EgressMasquerade says which pod traffic leaves the node with the node's
// address, as ip-masq-agent and the bridge CNI plugin's ipMasq do: a packet
// from a pod (source in PodCIDRs) to anywhere outside PodCIDRs,
// ServiceCIDRs, NonMasqueradeCIDRs and, unless MasqueradeLinkLocal, the
// link-local ranges. Service traffic keeps its own masquerade rules (the
// mark); the destination an egress rule sees is the one after DNAT, an
// endpoint's.
type EgressMasquerade struct {
	// PodCIDRs are the cluster's pod networks (the cluster CIDRs, any
	// number per family). A family without one masquerades nothing.
	PodCIDRs []netip.Prefix
	// ServiceCIDRs are the cluster's Service networks.
	ServiceCIDRs []netip.Prefix
	// NonMasqueradeCIDRs are further destinations left alone
	// (ip-masq-agent's nonMasqueradeCIDRs).
	NonMasqueradeCIDRs []netip.Prefix
	// MasqueradeLinkLocal masquerades traffic to 169.254.0.0/16 and
	// fe80::/10 too (ip-masq-agent's masqLinkLocal and masqLinkLocalIPv6).
	MasqueradeLinkLocal bool
}

// Equal reports whether e and o masquerade the same traffic the same way.
func (e EgressMasquerade) Equal(o EgressMasquerade) bool {
	return e.MasqueradeLinkLocal == o.MasqueradeLinkLocal && slices.Equal(e.PodCIDRs, o.PodCIDRs) &&
		slices.Equal(e.ServiceCIDRs, o.ServiceCIDRs) && slices.Equal(e.NonMasqueradeCIDRs, o.NonMasqueradeCIDRs)
}

// clone returns e with slices of its own.
func (e EgressMasquerade) clone() EgressMasquerade {
	e.PodCIDRs = slices.Clone(e.PodCIDRs)
	e.ServiceCIDRs = slices.Clone(e.ServiceCIDRs)
	e.NonMasqueradeCIDRs = slices.Clone(e.NonMasqueradeCIDRs)
	return e
}

// Schedulers are the values model.SchedulerAnnotation accepts.
var Schedulers = []string{"random", "rr", "sh", "lc", "maglev"}

// DefaultMasqueradeMark is kube-proxy's: masqueradeBit 14.
const DefaultMasqueradeMark = 1 << 14

// Mark returns the masquerade mark in effect: MasqueradeMark, or the default.
func (n NodeConfig) Mark() uint32 {
	if n.MasqueradeMark == 0 {
		return DefaultMasqueradeMark
	}
	return n.MasqueradeMark
}

// Table is the per-node service table. It is immutable once built.
type Table struct {
	// Node is the NodeConfig the table was built for, NodePortAddresses cleaned.
	Node NodeConfig
	// Ports holds one entry per (Service, port, family), sorted by ID, then
	// family (ipfamily.IPv4 first). (ID, ipfamily.Family) is unique.
	Ports []*ServicePort
	// Errors lists Services (or ports) the node cannot express, each skipped
	// whole; all other Services are in Ports. Sorted by Service, Port, Family.
	Errors []*SkipError
	// Seq identifies the table among all an Assembler of this process built
	// (0: not built by one); Delta, when not nil, says how Ports differs
	// from the table the same Assembler built just before (Seq Delta.From).
	// A consumer that programmed that table may apply Delta instead of
	// comparing every entry; any other consumer compares Ports.
	Seq   uint64
	Delta *Delta
}

// Delta is the difference between two tables' Ports: Removed holds the
// entries of the older table that the newer one lacks, Added those of the
// newer table the older one lacks (entries compared by pointer; an entry
// replaced by a new one of the same ID and family is in both). Each is
// sorted by ID, then family.
type Delta struct {
	From           uint64
	Removed, Added []*ServicePort
}

// DeltaFrom returns t's Delta when it follows the table of Seq seq (not
// 0), and nil otherwise: a consumer that programmed table seq may apply
// the result; on nil it compares every entry.
func (t *Table) DeltaFrom(seq uint64) *Delta {
	if seq == 0 || t.Delta == nil || t.Delta.From != seq {
		return nil
	}
	return t.Delta
}

// PortName identifies a Service port, as kube-proxy's ServicePortName does.
type PortName struct {
	Namespace string
	Name      string
	Port      string // the Service port's name ("" for a single unnamed port)
	Protocol  model.Protocol
}

// String returns "namespace/name:port" ("namespace/name" for an unnamed port),
// as kube-proxy prints a ServicePortName.
func (p PortName) String() string {
	if p.Port == "" {
		return p.Namespace + "/" + p.Name
	}
	return p.Namespace + "/" + p.Name + ":" + p.Port
}

// FrontendKind says how traffic reaches a Service port.
type FrontendKind uint8

const (
	FrontendClusterIP FrontendKind = iota
	FrontendExternalIP
	FrontendLoadBalancer
	FrontendNodePort
)

func (k FrontendKind) String() string {
	return [...]string{"ClusterIP", "ExternalIP", "LoadBalancer", "NodePort"}[k]
}

// Frontend is one (address, port) that captures traffic for a Service port.
// For FrontendNodePort, Addr is one of NodeConfig.NodePortAddresses of this family.
type Frontend struct {
	Kind FrontendKind
	Addr netip.Addr
	Port uint16
}

// Endpoint is one backend address and port of a Service port.
type Endpoint struct {
	Addr netip.Addr
	Port uint16
	// Local is set when the endpoint runs on this node.
	Local bool
	// Ready, Serving and Terminating are the EndpointSlice conditions.
	Ready       bool
	Serving     bool
	Terminating bool
	// NodeName and Zone say where the endpoint runs ("" if unknown).
	NodeName string
	Zone     string
}

// String returns "addr:port" ("[addr]:port" for ipfamily.IPv6).
func (e Endpoint) String() string { return netip.AddrPortFrom(e.Addr, e.Port).String() }

// ServicePort is one Service port in one IP family: the unit every data plane
// programs (one service chain in nftables).
type ServicePort struct {
	// ID is a stable, readable identity, "namespace/name:port/protocol" with
	// port the Service port's name, or its number when the port is unnamed, and
	// protocol in lower case: "default/my-nginx:http/tcp", "default/dns:53/udp".
	// Port names must contain a letter, so a name never reads as a number.
	// It is unique within a family; a dual-stack port has one entry per family
	// with the same ID (the family is implied by the table a backend puts it
	// in). Sorting is by ID, then Family.
	ID       string
	Name     PortName
	Family   ipfamily.Family
	Protocol model.Protocol
	// Port is the Service port (spec.ports[].port).
	Port uint16

	// ClusterIP is the Service's ClusterIP of this family (invalid if none).
	ClusterIP netip.Addr
	// NodePort is spec.ports[].nodePort (0 if none).
	NodePort uint16
	// ExternalIPs and LoadBalancerIPs of this family, sorted and deduplicated;
	// LB ingresses with an ipMode other than VIP (Proxy) are left out (the load
	// balancer proxies, we must not capture), as are hostname-only ones.
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr
	// Frontends lists every captured (address, port), in a deterministic order:
	// ClusterIP, externalIPs, LB IPs (each sorted), NodePorts (one per
	// node-port address of this family, sorted). An (address, port) listed
	// twice (an externalIP that is also an LB IP) appears once, as its first
	// kind.
	Frontends []Frontend

	// SourceRanges is loadBalancerSourceRanges of this family (masked, sorted,
	// deduplicated); when non-empty, traffic to LB IPs from outside them is
	// dropped before DNAT. NodePorts and ClusterIPs are not filtered. A
	// zero-length prefix (0.0.0.0/0, ::/0) means "allow all" and empties the
	// list, as in kube-proxy.
	SourceRanges []netip.Prefix

	// ExternalPolicyLocal is externalTrafficPolicy: Local (for NodePort and
	// LoadBalancer Services) on a port that is ExternallyAccessible: external
	// traffic keeps its source IP and goes to LocalEndpoints only; traffic from
	// pods or the node itself goes to ClusterEndpoints ("short-circuit").
	ExternalPolicyLocal bool
	// InternalPolicyLocal is internalTrafficPolicy: Local: ClusterIP traffic goes
	// to LocalEndpoints only.
	InternalPolicyLocal bool
	// HealthCheckNodePort is spec.healthCheckNodePort (0 if none); set only for
	// LoadBalancer Services with externalTrafficPolicy Local, as kube-proxy.
	// Every entry of the Service carries the same value.
	HealthCheckNodePort uint16
	// AffinityTimeout is the ClientIP affinity timeout; 0 means no affinity.
	AffinityTimeout time.Duration
	// Scheduler is the Service's model.SchedulerAnnotation, one of
	// Schedulers ("": the plane's default).
	Scheduler string

	// ClusterEndpoints are the endpoints for traffic under the Cluster policy:
	// ready ones, narrowed by topology hints when those apply, else (no ready
	// endpoint anywhere) the serving+terminating ones. Hints are used only when
	// every ready endpoint has them and some endpoint is hinted for this node
	// (forNodes) or zone (forZones); spec.trafficDistribution reaches the table
	// only through those hints, which the EndpointSlice controller sets (as in
	// kube-proxy). nil when empty, and always nil when !UsesClusterEndpoints.
	// Sorted by address, then port.
	ClusterEndpoints []Endpoint
	// LocalEndpoints are the endpoints on this node, chosen per set (ready,
	// else serving+terminating; never narrowed by topology), for Local
	// policies. nil when empty, and always nil when !UsesLocalEndpoints.
	// Sorted likewise.
	LocalEndpoints []Endpoint
	// HasEndpoints is set when the Service port has any usable endpoint in the
	// cluster (ready or serving+terminating). When false, traffic is rejected
	// (ICMP port unreachable / TCP RST); when true but the policy's set is
	// empty, traffic is dropped.
	HasEndpoints bool
	// AllEndpoints are every endpoint of the port whatever its state: UDP/SCTP
	// conntrack cleanup compares against them. Sorted likewise; nil when none.
	// ClusterEndpoints and LocalEndpoints share its array when they hold every
	// endpoint (the entry is immutable, as the whole table).
	AllEndpoints []Endpoint
}

// ExternallyAccessible reports whether the port takes traffic other than to
// its ClusterIP: it has a NodePort, externalIPs or LB IPs (kube-proxy's
// ExternallyAccessible). A NodePort counts even when this node has no
// node-port address of the family.
func (sp *ServicePort) ExternallyAccessible() bool {
	return sp.NodePort != 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
}

// UsesClusterEndpoints reports whether any traffic goes to ClusterEndpoints:
// cluster internal policy, or external traffic at all (under the Cluster
// policy, or the short-circuit of the Local policy), as kube-proxy.
func (sp *ServicePort) UsesClusterEndpoints() bool {
	return !sp.InternalPolicyLocal || sp.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether any traffic goes to LocalEndpoints:
// internal or external policy Local.
func (sp *ServicePort) UsesLocalEndpoints() bool {
	return sp.InternalPolicyLocal || sp.ExternalPolicyLocal
}

// ReachableEndpoints returns the endpoints some traffic on this node can reach:
// the union of ClusterEndpoints and LocalEndpoints, sorted by address then port
// (kube-proxy's allLocallyReachableEndpoints). Backends use it for per-endpoint
// objects (affinity, hairpin). The result is fresh; callers may keep it.
func (sp *ServicePort) ReachableEndpoints() []Endpoint {
	return unionEndpoints(sp.ClusterEndpoints, sp.LocalEndpoints)
}

// HasExternalFrontends reports whether the port has NodePort, externalIP or LB frontends.
func (sp *ServicePort) HasExternalFrontends() bool {
	for _, f := range sp.Frontends {
		if f.Kind != FrontendClusterIP {
			return true
		}
	}
	return false
}

// LoadBalancerIPInSourceRanges reports whether one of the port's LB IPs lies
// in its loadBalancerSourceRanges: traffic from the node itself, which may
// carry a node address after an LB hairpin, is then let through the
// firewall as kube-proxy lets it.
func (sp *ServicePort) LoadBalancerIPInSourceRanges() bool {
	for _, ip := range sp.LoadBalancerIPs {
		for _, p := range sp.SourceRanges {
			if p.Contains(ip) {
				return true
			}
		}
	}
	return false
}

// SkipError names a Service (and port, when one port is at fault) that the node
// cannot express, and why. The rest of the table is unaffected.
//
// Port == "": the whole Service is skipped (an invalid value in it: Reason names
// the field). Port != "": only that Service port is skipped, in ipfamily.Family only
// (ipfamily.Family 0: in every family); Port is the port part of the ID ("http/tcp",
// "80/tcp"), used when two entries claim the same frontend.
type SkipError struct {
	Service model.ServiceKey
	Port    string // "" when the whole Service is skipped
	// Family is the family of the skipped entry; 0 when every family is affected.
	Family ipfamily.Family
	// Conflict is set when the entry lost a claim to another Service (a
	// NodePort or frontend taken twice); otherwise the Service is invalid.
	Conflict bool
	Reason   string
}

func (e *SkipError) Error() string {
	s := "Service " + e.Service.String()
	if e.Port != "" {
		s += " port " + e.Port
	}
	if e.Family != 0 {
		s += " (" + e.Family.String() + ")"
	}
	return s + ": " + e.Reason
}

// LocalTraffic is how a data plane tells traffic from this node's pods, as
// kube-proxy's LocalTrafficDetector does: by source prefix (the family's
// first cluster CIDR), else by input interface name (or name prefix). The
// zero value detects nothing.
type LocalTraffic struct {
	CIDR        netip.Prefix
	Iface       string
	IfacePrefix bool
}

// LocalTraffic returns the node's detection of local pod traffic of family
// f: the first of ClusterCIDRs in f; with no ClusterCIDRs at all, the pod
// interface (a CIDR of the other family only detects nothing in f).
func (n NodeConfig) LocalTraffic(f ipfamily.Family) LocalTraffic {
	for _, p := range n.ClusterCIDRs {
		if ipfamily.OfPrefix(p) == f {
			return LocalTraffic{CIDR: p.Masked()}
		}
	}
	if len(n.ClusterCIDRs) == 0 && n.PodInterface != "" {
		return LocalTraffic{Iface: n.PodInterface, IfacePrefix: n.PodInterfacePrefix}
	}
	return LocalTraffic{}
}

// NodePortAddrs returns the addresses of family f that NodePorts are served
// on: NodePortAddresses without loopback (never served: CVE-2020-8558),
// sorted, without duplicates.
func (n NodeConfig) NodePortAddrs(f ipfamily.Family) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.NodePortAddresses {
		if ipfamily.Of(a) == f && !a.IsLoopback() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

package trace

import (
	"fmt"
	"net/netip"
	"time"
)

// Trace is the whole story of one packet through the cluster and of its reply:
// what the tracer was asked, every hop in order, and how it ended. It is pure
// data (JSON-friendly); the text, JSON, SVG and Mermaid outputs all render it.
type Trace struct {
	// Request is what was asked, resolved.
	Request Request `json:"request"`
	// Hops are the places the packet passes, in order: the sender, each node
	// (with its netfilter steps and routing decision), and the receiver.
	Hops []Hop `json:"hops"`
	// Reply is the way back for a delivered packet (empty otherwise): the
	// receiver's answer through the same nodes, translated back by conntrack.
	Reply []Hop `json:"reply,omitempty"`
	// Choice is the endpoint choice made on the way (nil when no Service
	// chose an endpoint).
	Choice *Choice `json:"choice,omitempty"`
	// Socket is what the sender's socket load balancer did at connect(),
	// before any packet existed (--data-plane ebpf; nil when the
	// destination is no frontend it sees or the sender is off the nodes).
	Socket *SocketLB `json:"socket,omitempty"`
	// TC is what a node's tc load balancer did with the first packet as it
	// arrived on the node's uplink (--data-plane ebpf with --ebpf-external;
	// nil when the packet met no frontend of it there).
	TC *TCLB `json:"tc,omitempty"`
	// Verdict is how the packet ended.
	Verdict Verdict `json:"verdict"`
	// Summary counts the rewrites and hops.
	Summary Summary `json:"summary"`
}

// Request is the traced packet as asked and resolved.
type Request struct {
	From string `json:"from"` // as given: a pod, a node, "client", an IP[:port]
	To   string `json:"to"`   // as given: a Service, IP:port, NODE:nodePort, a pod
	// Service is the Service the destination names or belongs to ("ns/name"),
	// "" when the destination is not a Service's.
	Service string `json:"service,omitempty"`
	// Frontend says which of the Service's frontends the destination is:
	// "ClusterIP", "NodePort", "LoadBalancer IP", "externalIP"; "" for none.
	Frontend string `json:"frontend,omitempty"`
	// Packet is the first packet as it leaves the sender.
	Packet Tuple `json:"packet"`
	// EphemeralPort is set when the source port was picked by the tracer (as
	// the kernel would pick one from ip_local_port_range), not given.
	EphemeralPort bool `json:"ephemeralPort,omitempty"`
	// EphemeralNetNS names the network namespace whose kernel picked the
	// ephemeral port and held it for the probe (Verify); "" when the tracer
	// picked it at random.
	EphemeralNetNS string `json:"ephemeralNetns,omitempty"`
	// Source of the rulesets: "kernel" (read back from live nodes) or
	// "rendered" (built from the cluster state as svcnet proxy would).
	Rules string `json:"rules"`
	// Notes explain choices the tracer made in resolving the request.
	Notes []string `json:"notes,omitempty"`
}

// Tuple is a packet's addresses as the rules see them.
type Tuple struct {
	Proto string         `json:"proto"` // "tcp", "udp", "sctp"
	Src   netip.AddrPort `json:"src"`
	Dst   netip.AddrPort `json:"dst"`
	Mark  uint32         `json:"mark,omitempty"`
}

// String renders the tuple: "tcp 10.0.0.1:5 → 10.96.0.1:80".
func (t Tuple) String() string {
	s := fmt.Sprintf("%s %s → %s", t.Proto, t.Src, t.Dst)
	if t.Mark != 0 {
		s += fmt.Sprintf(" (mark 0x%x)", t.Mark)
	}
	return s
}

// PlaceKind says what a place is.
type PlaceKind string

const (
	PlaceExternal PlaceKind = "external" // outside the cluster (the lab's client)
	PlaceNode     PlaceKind = "node"     // a node's own network namespace
	PlacePod      PlaceKind = "pod"      // a pod's network namespace
)

// Place is where a packet is.
type Place struct {
	Kind PlaceKind `json:"kind"`
	// Name: "client" or the external address; the node's name; "ns/name" of
	// the pod.
	Name string `json:"name"`
	// Node is the node the place is on (a pod's node, a node itself); "" for
	// an external place.
	Node string `json:"node,omitempty"`
	// Addr is the place's address on the path (a node's InternalIP, a pod's IP).
	Addr netip.Addr `json:"addr"`
	// NetNS is the place's network namespace when known (the lab's names).
	NetNS string `json:"netns,omitempty"`
}

func (p Place) String() string {
	switch p.Kind {
	case PlacePod:
		return fmt.Sprintf("pod %s on %s", p.Name, p.Node)
	case PlaceNode:
		return "node " + p.Name
	}
	return p.Name
}

// Hop is one place the packet passes and what happened there.
type Hop struct {
	Place Place `json:"place"`
	// In is the interface the packet came in on; "" when the place sends it.
	In string `json:"in,omitempty"`
	// Arrive is the packet as it arrives (or is sent).
	Arrive Tuple `json:"arrive"`
	// Steps are the netfilter steps on a node, in order (empty elsewhere).
	Steps []Step `json:"steps,omitempty"`
	// TC is the tc load balancer's work on the packet here (nil: none):
	// at ingress before Steps, at egress after them.
	TC *TCStep `json:"tc,omitempty"`
	// Rewrites are the translations the packet met here, in order.
	Rewrites []Rewrite `json:"rewrites,omitempty"`
	// Route is the routing decision that sends the packet on (nil when it
	// ends here).
	Route *Route `json:"route,omitempty"`
	// Leave is the packet as it leaves (after every rewrite); zero when it
	// ends here.
	Leave *Tuple `json:"leave,omitempty"`
	// End says how the packet ends here ("" when it goes on): "delivered to
	// ...", "dropped: ...", "rejected: ...".
	End string `json:"end,omitempty"`
}

// Step is one netfilter step: a hook entered, a base chain, a rule that
// decided something, a rewrite. The tracer keeps the steps that tell the
// story (rules that did not match are left out unless asked for).
type Step struct {
	Hook   string `json:"hook"`
	Table  string `json:"table,omitempty"`
	Chain  string `json:"chain,omitempty"`
	Rule   int    `json:"rule"` // index in Chain; -1 when not a rule's step
	Text   string `json:"text,omitempty"`
	Action string `json:"action"`
	Target string `json:"target,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// RewriteKind names a translation.
type RewriteKind string

const (
	RewriteDNAT       RewriteKind = "DNAT"
	RewriteSNAT       RewriteKind = "SNAT" // masquerade
	RewriteReverseDst RewriteKind = "un-SNAT"
	RewriteReverseSrc RewriteKind = "un-DNAT"
)

// Rewrite is one translation of the packet's addresses.
type Rewrite struct {
	Kind RewriteKind `json:"kind"`
	Hook string      `json:"hook"`
	// By says what did it: "table chain rule N" with the rule's text, or
	// "conntrack" for a reply's reverse translation.
	By     string `json:"by"`
	Rule   string `json:"rule,omitempty"`
	Mark   uint32 `json:"mark,omitempty"` // the mark that asked for it (masquerade)
	Before Tuple  `json:"before"`
	After  Tuple  `json:"after"`
}

// Route is a routing decision.
type Route struct {
	// Text is the route as `ip route` shows it ("192.168.2.0/24 via 172.26.236.178 dev eth0 proto 154").
	Text string `json:"text"`
	// Dev is the outgoing interface; Via the next hop's address when gatewayed.
	Dev string     `json:"dev"`
	Via netip.Addr `json:"via,omitzero"`
	// Next is the place the packet goes to.
	Next Place `json:"next"`
	// LeavesCluster is set when the route takes the packet out of the
	// cluster network (the node network's gateway).
	LeavesCluster bool `json:"leavesCluster,omitempty"`
	// Link says how it gets there ("veth to the fabric bridge br0", "bridge cni0 → veth of the pod").
	Link string `json:"link,omitempty"`
}

// Choice is an endpoint choice made by a Service's rules.
type Choice struct {
	Node    string `json:"node"`
	Service string `json:"service"`
	// Set: "cluster" or "local" endpoints; Fallback is set when they are the
	// serving-and-terminating fallback.
	Set        string      `json:"set,omitempty"`
	Affinity   string      `json:"affinity,omitempty"`
	Candidates []Candidate `json:"candidates"`
	// Socket is set when the socket load balancer chose, at connect() on
	// the sender (Node is the sender's node), not a rule.
	Socket bool `json:"socket,omitempty"`
	// TC is set when the tc load balancer of Node chose, at its uplink's
	// ingress, not a rule.
	TC bool `json:"tc,omitempty"`
	// Scheduler says how the socket or tc load balancer chooses. Hashed:
	// the flow decides (Maglev), so the chosen candidate is the only one
	// this flow can take; the others' probabilities are those of any flow.
	Scheduler string `json:"scheduler,omitempty"`
	Hashed    bool   `json:"hashed,omitempty"`
}

// SocketLB is what a node's socket load balancer (the cgroup connect
// programs of --data-plane ebpf) does with one connect() to a Service
// frontend: translate it to one backend, refuse it, or leave it to the
// rules.
type SocketLB struct {
	// Hook is the program that decides: "cgroup connect4" or "cgroup
	// connect6" of Node's cgroup.
	Hook string `json:"hook"`
	Node string `json:"node"`
	// Frontend and Proto are the services map key the connect looks up.
	Frontend netip.AddrPort `json:"frontend"`
	Proto    string         `json:"proto"`
	// Service is the Service port of the frontend ("ns/name:port/proto"),
	// Kind which frontend it is ("ClusterIP", ...), Set whose endpoints the
	// entry holds ("cluster" or "local").
	Service string `json:"service"`
	Kind    string `json:"kind"`
	Set     string `json:"set,omitempty"`
	// Held: the services map holds the frontend, with Backends (none: the
	// connect is refused with ECONNREFUSED). Otherwise the map has no
	// entry for it and Left says why the rules decide instead.
	Held     bool             `json:"held"`
	Backends []netip.AddrPort `json:"backends,omitempty"`
	// Affinity is the entry's ClientIP affinity timeout (0: none): a
	// client (its socket's network namespace) keeps the backend of its
	// last connect while it connects again within it. Scheduler is how the
	// entry chooses otherwise (the Service's svcnet.io/scheduler; "": the
	// proxy's --ebpf-scheduler).
	Affinity  time.Duration `json:"affinity,omitempty"`
	Scheduler string        `json:"scheduler,omitempty"`
	Left      string        `json:"left,omitempty"`
	// Mapped: the connect is left to the rules (Left) although the
	// services map holds the frontend, for other sockets (a UDP frontend:
	// unconnected sockets' datagrams are translated at sendmsg).
	Mapped bool `json:"mapped,omitempty"`
	// Backend is the backend the trace follows, and Sent the first packet
	// of the translated connection, to it: from the source address the
	// kernel picks for the backend's route, which for a node's socket may
	// not be the one towards the frontend (both set when translated).
	Backend netip.AddrPort `json:"backend,omitzero"`
	Sent    *Tuple         `json:"sent,omitempty"`
}

// Translated reports whether the connect goes to a backend instead of
// the frontend.
func (s *SocketLB) Translated() bool { return s != nil && s.Held && s.Sent != nil }

// Refused reports whether the connect fails with ECONNREFUSED.
func (s *SocketLB) Refused() bool { return s != nil && s.Held && len(s.Backends) == 0 }

// Candidate is one possible fate of the first packet and its probability.
type Candidate struct {
	Endpoint    string  `json:"endpoint"` // ip:port, or the verdict when none ("dropped")
	Node        string  `json:"node,omitempty"`
	Pod         string  `json:"pod,omitempty"`
	Probability string  `json:"probability"` // exact: "1/3"
	P           float64 `json:"p"`
	Chosen      bool    `json:"chosen,omitempty"`
	Terminating bool    `json:"terminating,omitempty"`
}

// VerdictKind is how a packet ended.
type VerdictKind string

const (
	Delivered   VerdictKind = "delivered"
	Dropped     VerdictKind = "dropped"
	Rejected    VerdictKind = "rejected"
	Filtered    VerdictKind = "filtered" // dropped by a source-range filter
	Unreachable VerdictKind = "unreachable"
)

// Verdict is how the packet ended, and why.
type Verdict struct {
	Kind   VerdictKind `json:"kind"`
	Place  string      `json:"place"`
	Reason string      `json:"reason"`
}

// Summary counts what the packet met.
type Summary struct {
	Rewrites      int `json:"rewrites"`      // translations on the way in
	ReplyRewrites int `json:"replyRewrites"` // reverse translations on the way back
	NodeHops      int `json:"nodeHops"`      // nodes the packet crossed on the way in
}

package trace

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/ebpf/tclb"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// The ebpf plane's tc load balancer (svcnet proxy --ebpf-external) sits on
// the node's uplink: a new connection from off the nodes to a frontend it
// holds (a NodePort on the node's address, an externalIP, an LB IP) is sent
// to a backend at tc ingress, before netfilter. A local backend's packet is
// only DNATed (and marked for masquerade under the Cluster policy) and goes
// on through the node's stack; a remote backend's is DNATed and SNATed to
// the node's address and forwarded by a FIB lookup, past the node's
// netfilter; the answers are translated back by the programs.

// tcSNATPort is the SNAT port a trace shows before the probe tells the
// one the program chose (one of tclb.SNATPorts).
const tcSNATPort = 61000

// TCFunc says what node's tc load balancer does with a new connection
// from src, arriving on the node's uplink, to dst of protocol proto ("tcp",
// ...): nil when dst is no frontend of the node's table that takes outside
// traffic. Backend is left unset.
type TCFunc func(node string, src, dst netip.AddrPort, proto string) (*TCLB, error)

// TCLB is what a node's tc load balancer does with the first packet of a
// connection from off the nodes to one of its frontends: send it to a
// backend, or leave it to the rules.
type TCLB struct {
	// Hook is where it decides: "tc ingress eth0" of Node.
	Hook  string `json:"hook"`
	Node  string `json:"node"`
	Iface string `json:"iface"`
	// Frontend and Proto are the services map key; Service is the Service
	// port ("ns/name:port/proto"), Kind which frontend it is.
	Frontend netip.AddrPort `json:"frontend"`
	Proto    string         `json:"proto"`
	Service  string         `json:"service"`
	Kind     string         `json:"kind"`
	// Held: the services map holds the frontend with Backends (Local per
	// backend: on this node); LocalPolicy is externalTrafficPolicy Local.
	// Otherwise Left says why the rules decide.
	Held        bool             `json:"held"`
	Backends    []netip.AddrPort `json:"backends,omitempty"`
	Local       []bool           `json:"local,omitempty"`
	LocalPolicy bool             `json:"localPolicy,omitempty"`
	Left        string           `json:"left,omitempty"`
	// Scheduler is the Service's svcnet.io/scheduler ("": the proxy's
	// --ebpf-scheduler decides). Maglev: the backend is the one the flow
	// hashes to in the frontend's Maglev table, at MaglevSlot (held only),
	// the same on every node; otherwise one at random.
	Scheduler  string `json:"scheduler,omitempty"`
	Maglev     bool   `json:"maglev,omitempty"`
	MaglevSlot uint32 `json:"maglevSlot,omitempty"`
	// Backend is the backend the trace follows (held only); BackendLocal
	// says it is on Node. Mark is the masquerade mark a local backend's
	// packets get under the Cluster policy (0: none, the client's address
	// is kept). SNAT is the node's address and port a remote backend sees
	// (the port is the program's random choice of tclb.SNATPorts).
	Backend      netip.AddrPort `json:"backend,omitzero"`
	BackendLocal bool           `json:"backendLocal,omitempty"`
	Mark         uint32         `json:"mark,omitempty"`
	SNAT         netip.AddrPort `json:"snat,omitzero"`
	// Client is the connection's client as the program keys it; NodeAddr
	// the node's address of its family, the source a remote backend sees.
	Client   netip.AddrPort `json:"client,omitzero"`
	NodeAddr netip.Addr     `json:"nodeAddr,omitzero"`
}

// Translated reports whether the tc load balancer took the connection.
func (x *TCLB) Translated() bool { return x != nil && x.Held && x.Backend.IsValid() }

// Remote reports whether the connection goes to a backend on another node,
// forwarded past the node's netfilter.
func (x *TCLB) Remote() bool { return x.Translated() && !x.BackendLocal }

// TCStep is one tc program's work on a hop.
type TCStep struct {
	// Hook is "tc ingress eth0" or "tc egress eth0".
	Hook string `json:"hook"`
	// Action: "dnat" (a local backend), "dnat+snat" (a remote one),
	// "revnat" (an answer translated back).
	Action string `json:"action"`
	Detail string `json:"detail"`
	Before Tuple  `json:"before"`
	After  Tuple  `json:"after"`
	// PastNetfilter: the packet is forwarded by a FIB lookup and
	// bpf_redirect, so none of this node's netfilter hooks see it.
	PastNetfilter bool `json:"pastNetfilter,omitempty"`
}

// RenderedTC answers from each node's service table (tables, as
// RenderedRules), with the plane's own decision (ebpfplane.ExternalFor).
func RenderedTC(tables *NodeTables) TCFunc {
	return func(node string, src, dst netip.AddrPort, proto string) (*TCLB, error) {
		t, cfg, err := tables.Table(node)
		if err != nil {
			return nil, err
		}
		x := tcOf(t, node, dst, proto, cfg.Mark())
		if x != nil && x.Held && x.LocalPolicy {
			for _, p := range cfg.ClusterCIDRs {
				if p.Contains(src.Addr()) {
					x.Held, x.Backends, x.Local, x.Left = false, nil, nil, leftPodToLocal
				}
			}
		}
		return x, nil
	}
}

// leftPodToLocal is why the tc load balancer leaves a connection from the
// pod network to an externalTrafficPolicy Local frontend to the rules.
const leftPodToLocal = "traffic from the cluster's pod network to an externalTrafficPolicy Local frontend is left to the rules, which send it to any endpoint (as kube-proxy short-circuits it)"

// leftExternalOff is why a node whose svcnet proxy runs with
// --ebpf-external=false leaves traffic from outside to the rules.
const leftExternalOff = "the node's svcnet proxy runs with --ebpf-external=false: no tc load balancer, the nftables rules take traffic from outside the node"

// withProxyFlags wraps f with the flags of the node's svcnet proxy (found
// in its network namespace, Network.NetNS): one running with
// --ebpf-external=false holds no frontend in a tc load balancer, and one
// running with --ebpf-scheduler maglev chooses by Maglev for the Services
// that name no scheduler. A node whose namespace is unknown runs the
// defaults (on, random).
func withProxyFlags(net *Network, f TCFunc) TCFunc {
	type flags struct {
		externalOff bool
		scheduler   string
	}
	seen := map[string]*flags{}
	return func(node string, src, dst netip.AddrPort, proto string) (*TCLB, error) {
		x, err := f(node, src, dst, proto)
		if err != nil || x == nil {
			return x, err
		}
		fl := seen[node]
		if fl == nil {
			argvs, err := proxyArgvs(net, node)
			if err != nil {
				return nil, err
			}
			fl = &flags{}
			for _, argv := range argvs {
				fl.externalOff = fl.externalOff || externalOff(argv)
				if s := proxyScheduler(argv); s != "" {
					fl.scheduler = s
				}
			}
			seen[node] = fl
		}
		if fl.externalOff {
			x.Held, x.Backends, x.Local, x.LocalPolicy, x.Mark, x.Left = false, nil, nil, false, 0, leftExternalOff
		}
		if x.Scheduler == "" && fl.scheduler == string(ebpfplane.Maglev) {
			x.Maglev = true
		}
		return x, nil
	}
}

// tcOf finds dst among the outside frontends of t and says what the tc
// load balancer does with it; mark is the masquerade mark.
func tcOf(t *servicetable.Table, node string, dst netip.AddrPort, proto string, mark uint32) *TCLB {
	for _, sp := range t.Ports {
		if !strings.EqualFold(string(sp.Protocol), proto) {
			continue
		}
		d, ok := ebpfplane.ExternalFor(sp, dst)
		if !ok {
			continue
		}
		x := &TCLB{Hook: "tc ingress " + NodeIface, Node: node, Iface: NodeIface, Frontend: dst, Proto: proto,
			Service: sp.ID, Held: d.Held, Backends: d.Backends, Local: d.Local, LocalPolicy: d.LocalPolicy, Left: d.Left,
			Scheduler: sp.Scheduler, Maglev: sp.Scheduler == string(ebpfplane.Maglev)}
		if d.Held && !d.LocalPolicy {
			x.Mark = mark
		}
		for _, f := range sp.Frontends {
			if netip.AddrPortFrom(f.Addr, f.Port) == dst {
				x.Kind = f.Kind.String()
			}
		}
		return x
	}
	return nil
}

// tcIngress runs the first packet t of a connection, arriving at node nd
// on its uplink, through the node's tc load balancer:
// it records the decision and the endpoint choice and returns the tc step
// (nil when the rules decide) and the packet after it.
func (w *walk) tcIngress(nd *NodeNet, t Tuple) (*TCStep, Tuple, error) {
	if !w.e.plane().sockets || w.e.TC == nil || w.tc != nil {
		return nil, t, nil
	}
	x, err := w.e.TC(nd.Name, t.Src, t.Dst, t.Proto)
	if err != nil || x == nil {
		return nil, t, err
	}
	w.tc = x
	if !x.Held || len(x.Backends) == 0 {
		return nil, t, nil
	}
	var choice *Choice
	pick := 0
	if x.Maglev {
		var err error
		if pick, choice, err = w.maglevChoice(x, t); err != nil {
			return nil, t, err
		}
	} else {
		for i, be := range x.Backends {
			if be == w.start.Endpoint {
				pick = i
			}
		}
		choice = w.tcChoice(x, pick)
	}
	x.Backend, x.BackendLocal, x.Client = x.Backends[pick], x.Local[pick], t.Src
	x.NodeAddr = nd.Addr(t.Dst.Addr().Is6())
	w.choice = choice
	after := Tuple{Proto: t.Proto, Src: t.Src, Dst: x.Backend}
	st := &TCStep{Hook: x.Hook, Before: t}
	if x.BackendLocal {
		st.Action = "dnat"
		st.Detail = fmt.Sprintf("a backend on this node: destination rewritten to %s; the packet goes on through node %s's stack", x.Backend, nd.Name)
		if x.Mark != 0 {
			after.Mark = t.Mark | x.Mark
			st.Detail += fmt.Sprintf("; externalTrafficPolicy Cluster: skb mark |= 0x%x, so it is masqueraded in postrouting", x.Mark)
		} else {
			st.Detail += "; externalTrafficPolicy Local: no mark, the client's address is kept"
		}
	} else {
		x.Mark = 0
		port := w.start.SNATPort
		if port == 0 {
			port = tcSNATPort
		}
		x.SNAT = netip.AddrPortFrom(x.NodeAddr, port)
		after.Src = x.SNAT
		st.Action, st.PastNetfilter = "dnat+snat", true
		st.Detail = fmt.Sprintf("a backend on another node: destination rewritten to %s and source to %s (the node's address; the port is the program's random choice of %s), TTL lowered; forwarded by FIB lookup and bpf_redirect, past this node's netfilter",
			x.Backend, x.SNAT, tclb.SNATPorts)
	}
	st.After = after
	return st, after, nil
}

// tcChoice is the tc load balancer's endpoint choice: each backend of the
// entry with the same probability, the followed one chosen.
func (w *walk) tcChoice(x *TCLB, pick int) *Choice {
	set := "cluster"
	if x.LocalPolicy {
		set = "local"
	}
	return &Choice{Node: x.Node, Service: x.Service, Set: set, TC: true,
		Scheduler:  "uniformly at random, per new connection (the tc load balancer)",
		Candidates: w.uniformCandidates(x.Backends, pick)}
}

// tcRevNAT translates an answer the tc load balancer's connection expects
// at node nd: at tc ingress, a remote backend's answer to the SNAT address
// (ingress true); at tc egress, a local backend's answer leaving the
// uplink. It returns nil when t is no such answer.
func (w *walk) tcRevNAT(nd *NodeNet, t Tuple, ingress bool) *TCStep {
	x := w.tc
	if !x.Translated() || nd.Name != x.Node || t.Src != x.Backend {
		return nil
	}
	after := Tuple{Proto: t.Proto, Src: x.Frontend, Dst: x.Client}
	switch {
	case ingress && x.Remote() && t.Dst == x.SNAT:
		return &TCStep{Hook: "tc ingress " + x.Iface, Action: "revnat", Before: t, After: after, PastNetfilter: true,
			Detail: fmt.Sprintf("an answer to the SNAT address %s (revnat): rewritten back to %s → %s, forwarded by FIB lookup and bpf_redirect, past this node's netfilter", x.SNAT, x.Frontend, x.Client)}
	case !ingress && !x.Remote() && t.Dst == x.Client:
		return &TCStep{Hook: "tc egress " + x.Iface, Action: "revnat", Before: t, After: after,
			Detail: fmt.Sprintf("an answer from the local backend (revnat): source rewritten back to the frontend %s", x.Frontend)}
	}
	return nil
}

// tcRewrites are a tc step's translations as rewrites.
func tcRewrites(st *TCStep) []Rewrite {
	by := "the tc load balancer (tclb conns)"
	var out []Rewrite
	b := st.Before
	if st.After.Dst != b.Dst {
		kind := RewriteDNAT
		if st.Action == "revnat" {
			kind = RewriteReverseDst
		}
		a := Tuple{Proto: b.Proto, Src: b.Src, Dst: st.After.Dst, Mark: st.After.Mark}
		out = append(out, Rewrite{Kind: kind, Hook: st.Hook, By: by, Before: b, After: a})
		b = a
	}
	if st.After.Src != b.Src {
		kind := RewriteSNAT
		if st.Action == "revnat" {
			kind = RewriteReverseSrc
		}
		out = append(out, Rewrite{Kind: kind, Hook: st.Hook, By: by, Before: b, After: st.After})
	}
	return out
}

// tcNote says why the tc load balancer left a frontend to the rules.
func tcNote(x *TCLB) string {
	return fmt.Sprintf("the tc load balancer (%s of node %s) leaves %s/%s to the nftables rules: %s", x.Hook, x.Node, x.Frontend, x.Proto, x.Left)
}

// maglevChoice is the tc load balancer's choice under Maglev: the backend
// whose slot of the frontend's table the first packet's flow t hashes to
// (tclb.MaglevTable, the program's own hash), each backend with its share
// of the slots. A requested endpoint (Start.Endpoint) other than that one
// cannot be reached by this flow, and the trace says so.
func (w *walk) maglevChoice(x *TCLB, t Tuple) (int, *Choice, error) {
	proto, err := modelProtocol(x.Proto)
	if err != nil {
		return 0, nil, err
	}
	table, err := tclb.NewMaglevTable(x.Backends)
	if err != nil {
		return 0, nil, fmt.Errorf("node %s: %s: %w", x.Node, x.Service, err)
	}
	pick, slot, err := table.Pick(t.Src, t.Dst, proto)
	if err != nil {
		return 0, nil, fmt.Errorf("node %s: %s: %w", x.Node, x.Service, err)
	}
	x.MaglevSlot = slot
	set := "cluster"
	if x.LocalPolicy {
		set = "local"
	}
	c := &Choice{Node: x.Node, Service: x.Service, Set: set, TC: true, Hashed: true,
		Scheduler: fmt.Sprintf("by Maglev consistent hashing (the tc load balancer): the flow's addresses, ports and protocol hash to slot %d of the frontend's %d-slot table, which holds %s; every node builds the same table, so the flow gets this backend whichever node it enters",
			slot, len(table), x.Backends[pick])}
	slots := table.Slots(len(x.Backends))
	for i, be := range x.Backends {
		p := big.NewRat(int64(slots[i]), int64(len(table)))
		cand := Candidate{Endpoint: be.String(), Probability: p.RatString(), Chosen: i == pick}
		cand.P, _ = p.Float64()
		if pod := w.e.Net.PodByIP(be.Addr()); pod != nil {
			cand.Pod, cand.Node, cand.Terminating = pod.Key, pod.Node, pod.Terminating
		}
		c.Candidates = append(c.Candidates, cand)
	}
	if ep := w.start.Endpoint; ep.IsValid() && ep != x.Backends[pick] {
		w.notes = append(w.notes, fmt.Sprintf("the requested endpoint %s is not where this flow goes: under Maglev the tc load balancer of node %s sends %s → %s to %s (another source port may hash elsewhere)", ep, x.Node, t.Src, t.Dst, x.Backends[pick]))
	}
	return pick, c, nil
}

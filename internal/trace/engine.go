package trace

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/sim"
)

// RulesFunc returns a node's ruleset: every table of the node the tracer
// understands (svcnet's and the CNI plugin's hostPort tables, both families).
type RulesFunc func(node string) ([]*nft.Table, error)

// Engine traces packets through a cluster network.
//
// Contract: Trace is pure given Rules: the same network, rules and start give
// the same Trace. An Engine is not safe for concurrent use.
type Engine struct {
	Net   *Network
	Rules RulesFunc
	// RulesSource names where Rules come from ("kernel", "rendered"), for the
	// output.
	RulesSource string
	// Verbose keeps the steps of rules that did not match.
	Verbose bool
	// Plane is the data plane whose tables Rules returns (which tables are
	// compared with the kernel's trace events); nil stands for DefaultPlane.
	Plane *Plane
	// Rendered, when set, renders each node's ruleset from the cluster
	// state (for Verify's check of rules it cannot trace in the kernel).
	Rendered RulesFunc
	// Sockets says what each node's socket load balancer does with a
	// connect, for a plane that has one (nil: it is not consulted).
	// NewEngine answers from the cluster state whatever the rules' source
	// (RenderedSockets); Verify holds that answer against the maps.
	Sockets SocketsFunc
	// SocketMaps opens a node's socket load balancer maps as the kernel
	// holds them, for Verify (NewEngine: those attached to the node's
	// cgroup, from Network.Cgroups or the node's running svcnet proxy).
	SocketMaps SocketMapsFunc
	// TC says what each node's tc load balancer does with a connection
	// from off the nodes, for a plane that has one (nil: not consulted).
	TC TCFunc
	// TCMaps opens a node's tc load balancer maps, for Verify.
	TCMaps TCMapsFunc
}

// plane returns e.Plane, or the default one.
func (e *Engine) plane() *Plane {
	if e.Plane != nil {
		return e.Plane
	}
	return planes[DefaultPlane]
}

// Start is the first packet and where it starts.
type Start struct {
	From   Place
	Packet Tuple
	// Entry is the node that receives a packet from an external sender to an
	// address that is not a node's (a LoadBalancer IP, an externalIP).
	Entry string
	// Endpoint, when valid, picks the endpoint choice whose DNAT goes there
	// (as the kernel picked it, for verification); otherwise the first
	// candidate in rule order is followed.
	Endpoint netip.AddrPort
	// SNATPort, when set, is the port the tc load balancer took for a
	// connection to a remote backend (as the kernel took it, for
	// verification); otherwise the lowest of its range is shown.
	SNATPort uint16
}

// reasonLeft is the verdict reason of a packet routed out of the cluster
// network: where it goes from there (and any reply) is not modelled.
const reasonLeft = "out of the cluster (the node network's gateway): not traced further"

// maxHops bounds the places one packet passes.
const maxHops = 16

// ErrTrace is wrapped by errors about the request or the rules.
var ErrTrace = errors.New("cannot trace")

// Trace follows the first packet of a connection from its sender to its end,
// and, when delivered, its reply back. req is the resolved request (Resolve)
// the trace answers.
func (e *Engine) Trace(st Start, req Request) (*Trace, error) {
	w := &walk{e: e, sims: map[string]*sim.Simulator{}, start: st}
	req.Packet, req.Rules = st.Packet, e.RulesSource
	tr := &Trace{Request: req}
	hops, v, recv, final, err := w.path(st.From, st.Packet, false)
	if err != nil {
		return nil, err
	}
	tr.Hops, tr.Verdict, tr.Choice, tr.Socket, tr.TC = hops, v, w.choice, w.socket, w.tc
	if s := w.socket; s != nil && !s.Held {
		tr.Request.Notes = append(tr.Request.Notes, socketNote(s))
	}
	if x := w.tc; x != nil && !x.Held {
		tr.Request.Notes = append(tr.Request.Notes, tcNote(x))
	}
	tr.Request.Notes = append(tr.Request.Notes, w.notes...)
	// The packets carry the backend's address when the socket load
	// balancer translated the connect; getpeername still reports the
	// frontend to the sender.
	sent := st.Packet
	if w.socket.Translated() {
		sent = *w.socket.Sent
	}
	if v.Kind == Delivered && v.Reason != reasonLeft {
		back := Tuple{Proto: final.Proto, Src: final.Dst, Dst: final.Src}
		rhops, rv, _, rfinal, err := w.path(recv, back, true)
		if err != nil {
			return nil, fmt.Errorf("reply: %w", err)
		}
		tr.Reply = rhops
		if rv.Kind != Delivered {
			tr.Verdict = Verdict{Kind: rv.Kind, Place: rv.Place, Reason: "the reply is lost: " + rv.Reason}
		} else if rfinal.Src != sent.Dst || rfinal.Dst != sent.Src {
			tr.Verdict.Reason += fmt.Sprintf("; but the reply arrives as %s, not from %s: the sender's socket would not take it", rfinal, sent.Dst)
		}
	}
	tr.Summary = summarize(tr)
	return tr, nil
}

// walk is one Trace: a simulator per node, kept across the packet and its
// reply so conntrack state carries over.
type walk struct {
	e      *Engine
	start  Start
	sims   map[string]*sim.Simulator
	choice *Choice
	socket *SocketLB
	tc     *TCLB
	// notes are the walk's own notes for the request (Request.Notes).
	notes []string
}

func (w *walk) simulator(node string) (*sim.Simulator, error) {
	if s, ok := w.sims[node]; ok {
		return s, nil
	}
	tables, err := w.e.Rules(node)
	if err != nil {
		return nil, fmt.Errorf("rules of node %s: %w", node, err)
	}
	s := sim.New(nil, tables...)
	w.sims[node] = s
	return s, nil
}

// path walks t from place from until it is delivered or ends; it returns
// the hops, the verdict, the receiving place and the packet as received.
func (w *walk) path(from Place, t Tuple, reply bool) ([]Hop, Verdict, Place, Tuple, error) {
	net := w.e.Net
	var hops []Hop
	if !reply {
		var err error
		if t, err = w.connect(from, t); err != nil {
			return nil, Verdict{}, Place{}, Tuple{}, err
		}
		if w.socket.Refused() {
			h, v := refusedHop(from, t, w.socket)
			return []Hop{h}, v, Place{}, Tuple{}, nil
		}
	}
	dst := t.Dst.Addr()
	// in describes where the packet enters a node; iif is the interface
	// name netfilter's iifname sees there (a pod's veth is a port of the
	// pod bridge, so its packets come in on the bridge).
	in, iif, at := "", "", from
	switch from.Kind {
	case PlacePod:
		p := net.Pod(from.Name)
		if p == nil {
			return nil, Verdict{}, Place{}, Tuple{}, fmt.Errorf("pod %s: not in the cluster state: %w", from.Name, ErrTrace)
		}
		if dst == from.Addr {
			h := Hop{Place: from, Arrive: t, End: "delivered inside the pod (its own address: loopback, no node involved)"}
			return []Hop{h}, Verdict{Kind: Delivered, Place: from.String(), Reason: "to the pod's own address"}, from, t, nil
		}
		r, err := net.RouteFromPod(p, dst)
		if err != nil {
			return nil, Verdict{}, Place{}, Tuple{}, fmt.Errorf("%w: %w", err, ErrTrace)
		}
		leave := t
		hops = append(hops, Hop{Place: from, Arrive: t, Route: &r, Leave: &leave})
		at, in, iif = r.Next, "veth (pod "+p.Key+") on "+Bridge, Bridge
	case PlaceExternal:
		var entry *NodeNet
		if w.start.Entry != "" && !reply {
			entry = net.Node(w.start.Entry)
		}
		r, err := net.RouteFromExternal(dst, entry)
		if err != nil {
			v := Verdict{Kind: Unreachable, Place: from.String(), Reason: err.Error()}
			return []Hop{{Place: from, Arrive: t, End: "unreachable: " + err.Error()}}, v, Place{}, Tuple{}, nil
		}
		leave := t
		hops = append(hops, Hop{Place: from, Arrive: t, Route: &r, Leave: &leave})
		if r.Next.Kind == PlaceExternal {
			h := Hop{Place: r.Next, In: NodeIface, Arrive: t, End: fmt.Sprintf("received by %s", r.Next.Name)}
			return append(hops, h), Verdict{Kind: Delivered, Place: r.Next.Name, Reason: "to the external host, on the node network"}, r.Next, t, nil
		}
		at, in, iif = r.Next, NodeIface, NodeIface
	}
	for range maxHops {
		nd := net.Node(at.Name)
		if at.Kind != PlaceNode || nd == nil {
			return nil, Verdict{}, Place{}, Tuple{}, fmt.Errorf("place %s: not a node of the cluster: %w", at, ErrTrace)
		}
		// The tc load balancer at the uplink's ingress, before netfilter.
		var tcIn *TCStep
		if in == NodeIface && !reply {
			var err error
			if tcIn, t, err = w.tcIngress(nd, t); err != nil {
				return nil, Verdict{}, Place{}, Tuple{}, err
			}
		} else if in == NodeIface && reply {
			tcIn = w.tcRevNAT(nd, t, true)
		}
		var hop Hop
		var final Tuple
		if tcIn != nil && tcIn.PastNetfilter {
			hop, final = Hop{Place: at, In: in, Arrive: tcIn.Before, TC: tcIn, Rewrites: tcRewrites(tcIn)}, tcIn.After
		} else {
			var res sim.Result
			var err error
			hop, res, err = w.atNode(nd, at, in, iif, t, reply)
			if err != nil {
				return nil, Verdict{}, Place{}, Tuple{}, err
			}
			if tcIn != nil {
				hop.Arrive, hop.TC = tcIn.Before, tcIn
				hop.Rewrites = append(tcRewrites(tcIn), hop.Rewrites...)
			}
			final = tupleOf(res.Final)
			if res.Verdict != sim.Accepted {
				v := endVerdict(w.e.plane(), res, at)
				hop.End = string(v.Kind) + ": " + v.Reason
				return append(hops, hop), v, Place{}, Tuple{}, nil
			}
			if res.Delivery == sim.DeliverLocal {
				hop.End = fmt.Sprintf("delivered to a local socket of node %s (%s)", nd.Name, final.Dst)
				return append(hops, hop), Verdict{Kind: Delivered, Place: at.String(), Reason: "to a socket of the node"}, at, final, nil
			}
		}
		r, err := net.RouteFromNode(nd, final.Dst.Addr())
		if err != nil {
			hop.End = "unreachable: " + err.Error()
			return append(hops, hop), Verdict{Kind: Unreachable, Place: at.String(), Reason: err.Error()}, Place{}, Tuple{}, nil
		}
		// The tc load balancer at the uplink's egress, after netfilter.
		if r.Dev == NodeIface && hop.TC == nil {
			if st := w.tcRevNAT(nd, final, false); st != nil {
				hop.TC = st
				hop.Rewrites = append(hop.Rewrites, tcRewrites(st)...)
				final = st.After
			}
		}
		leave := final
		hop.Route, hop.Leave = &r, &leave
		hops = append(hops, hop)
		// The mark does not cross a veth into another namespace.
		t = Tuple{Proto: final.Proto, Src: final.Src, Dst: final.Dst}
		switch r.Next.Kind {
		case PlaceNode:
			at, in, iif = r.Next, NodeIface, NodeIface
			continue
		case PlacePod:
			h := Hop{Place: r.Next, In: PodIface, Arrive: t, End: fmt.Sprintf("delivered to pod %s at %s", r.Next.Name, t.Dst)}
			return append(hops, h), Verdict{Kind: Delivered, Place: r.Next.String(), Reason: "to the pod's address"}, r.Next, t, nil
		default:
			if !r.LeavesCluster && t.Dst.Addr() == r.Next.Addr {
				h := Hop{Place: r.Next, In: NodeIface, Arrive: t, End: fmt.Sprintf("received by %s", r.Next.Name)}
				return append(hops, h), Verdict{Kind: Delivered, Place: r.Next.Name, Reason: "to the external host"}, r.Next, t, nil
			}
			h := Hop{Place: r.Next, Arrive: t, End: "leaves the cluster"}
			return append(hops, h), Verdict{Kind: Delivered, Place: r.Next.Name, Reason: reasonLeft}, r.Next, t, nil
		}
	}
	return nil, Verdict{}, Place{}, Tuple{}, fmt.Errorf("more than %d hops: a routing loop: %w", maxHops, ErrTrace)
}

// atNode runs the packet through node nd's netfilter, arriving on interface
// iif ("" when a process of the node sends it). The first packet of the
// connection's original direction is enumerated to record the endpoint
// choice; everything else is simulated as is, with the node's conntrack state.
func (w *walk) atNode(nd *NodeNet, at Place, in, iif string, t Tuple, reply bool) (Hop, sim.Result, error) {
	s, err := w.simulator(nd.Name)
	if err != nil {
		return Hop{}, sim.Result{}, err
	}
	path := sim.PathPrerouting
	if in == "" {
		path = sim.PathOutput
	}
	ctx := sim.Context{LocalAddrs: nd.LocalAddrs(), Path: path, InIface: iif, EgressAddr: nd.Egress, IfaceAddr: nd.IfaceAddr}
	p, err := simPacket(t)
	if err != nil {
		return Hop{}, sim.Result{}, err
	}
	var res sim.Result
	if reply {
		res, err = s.Run(ctx, p)
	} else {
		res, err = w.choose(s, nd, ctx, p)
	}
	if err != nil {
		return Hop{}, sim.Result{}, fmt.Errorf("node %s: %w", nd.Name, err)
	}
	hop := Hop{Place: at, In: in, Arrive: t}
	hop.Steps, hop.Rewrites = w.steps(res, reply)
	return hop, res, nil
}

// choose enumerates the packet's possible fates on the node, records them as
// the endpoint choice when they involve a DNAT, and follows the wanted one.
func (w *walk) choose(s *sim.Simulator, nd *NodeNet, ctx sim.Context, p sim.Packet) (sim.Result, error) {
	outs, err := s.Enumerate(ctx, p)
	if err != nil {
		return sim.Result{}, err
	}
	pick := 0
	if w.start.Endpoint.IsValid() {
		for i, o := range outs {
			if d := dnatOf(o.Result); d != nil && d.After.Dst == w.start.Endpoint {
				pick = i
				break
			}
		}
	}
	if w.choice == nil {
		w.choice = w.describeChoice(nd, outs, pick)
	}
	return s.RunChoices(ctx, p, outs[pick].Choices)
}

// dnatOf returns the DNAT step of a result, or nil.
func dnatOf(r sim.Result) *sim.Step {
	for i := range r.Trace {
		if r.Trace[i].Action == sim.ActDNAT {
			return &r.Trace[i]
		}
	}
	return nil
}

func simPacket(t Tuple) (sim.Packet, error) {
	p := sim.Packet{Family: ipfamily.IPv4, Src: t.Src, Dst: t.Dst, Mark: t.Mark}
	if t.Dst.Addr().Is6() {
		p.Family = ipfamily.IPv6
	}
	proto, ok := nft.ProtoNumber(t.Proto)
	if !ok {
		return sim.Packet{}, fmt.Errorf("protocol %q: want tcp, udp or sctp: %w", t.Proto, ErrTrace)
	}
	p.Proto = proto
	return p, nil
}

func protoString(n uint8) string {
	if name, ok := nft.ProtoName(n); ok {
		return name
	}
	return fmt.Sprintf("proto-%d", n)
}

func tupleOf(p sim.Packet) Tuple {
	return Tuple{Proto: protoString(p.Proto), Src: p.Src, Dst: p.Dst, Mark: p.Mark}
}

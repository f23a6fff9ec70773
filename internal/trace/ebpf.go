package trace

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	"github.com/svcnet/svcnet/internal/ebpf/socklb"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// The ebpf plane is the nftables plane's tables, as they are, with the
// socket load balancer before them: a connect() on a node (a pod's or the
// node's own socket, in the node's cgroup) to a frontend its services map
// holds is connected to a backend at once, so the packets carry the
// backend's address from the first and meet the rules with no Service to
// match. Frontends it leaves out, and senders off the nodes, meet the rules
// exactly as on the nftables plane.
func init() {
	p := &Plane{name: ebpfplane.Name, explain: nftables.Rules{}, egress: nftables.IsEgressChain,
		service: func(chain, _ string) (string, string, bool) { return serviceOfChain(chain) }, sockets: true}
	p.read = p.readNFTables
	planes[p.name] = p
}

// SocketsFunc says what node's socket load balancer does with a connect to
// dst of protocol proto ("tcp", ...): nil when dst is no Service frontend
// of the node's table. Backend is left unset.
type SocketsFunc func(node string, dst netip.AddrPort, proto string) (*SocketLB, error)

// RenderedSockets answers from each node's service table (tables, as
// RenderedRules), with the plane's own decision (ebpfplane.SocketFor).
func RenderedSockets(tables *NodeTables) SocketsFunc {
	return func(node string, dst netip.AddrPort, proto string) (*SocketLB, error) {
		t, _, err := tables.Table(node)
		if err != nil {
			return nil, err
		}
		return socketOf(t, node, dst, proto), nil
	}
}

// socketOf finds dst among the frontends of t and says what the socket
// load balancer does with it.
func socketOf(t *servicetable.Table, node string, dst netip.AddrPort, proto string) *SocketLB {
	for _, sp := range t.Ports {
		if !strings.EqualFold(string(sp.Protocol), proto) {
			continue
		}
		d, ok := ebpfplane.SocketFor(sp, dst)
		if !ok {
			continue
		}
		s := &SocketLB{Hook: "cgroup connect4", Node: node, Frontend: dst, Proto: proto, Service: sp.ID,
			Held: d.Held, Backends: d.Backends, Affinity: d.Policy.Affinity,
			Scheduler: string(d.Policy.Scheduler), Left: d.Left, Set: "cluster"}
		if dst.Addr().Is6() {
			s.Hook = "cgroup connect6"
		}
		if s.Held && strings.EqualFold(proto, "udp") {
			s.Held, s.Mapped, s.Left = false, true, ebpfplane.LeftConnectedUDP
		}
		for _, f := range sp.Frontends {
			if netip.AddrPortFrom(f.Addr, f.Port) == dst {
				s.Kind = f.Kind.String()
				if f.Kind == servicetable.FrontendClusterIP && sp.InternalPolicyLocal {
					s.Set = "local"
				}
			}
		}
		return s
	}
	return nil
}

// connect runs the sender's connect() of t through its node's socket load
// balancer (planes with one; senders on a node): it records the decision
// and, when the connect is translated, the endpoint choice, and returns
// the tuple the connection's packets carry. A refused connect sends none.
func (w *walk) connect(from Place, t Tuple) (Tuple, error) {
	if !w.e.plane().sockets || w.e.Sockets == nil || (from.Kind != PlacePod && from.Kind != PlaceNode) {
		return t, nil
	}
	node := from.Node
	if from.Kind == PlaceNode {
		node = from.Name
	}
	s, err := w.e.Sockets(node, t.Dst, t.Proto)
	if err != nil || s == nil {
		return t, err
	}
	w.socket = s
	if !s.Held || len(s.Backends) == 0 {
		return t, nil
	}
	pick := 0
	for i, be := range s.Backends {
		if be == w.start.Endpoint {
			pick = i
		}
	}
	s.Backend = s.Backends[pick]
	w.choice = w.socketChoice(s, pick)
	t.Dst = s.Backend
	// The hook runs before the kernel picks the source address, so a
	// node's socket takes the one of the backend's route (the bridge
	// gateway towards its own pods).
	if nd := w.e.Net.Node(node); from.Kind == PlaceNode && nd != nil {
		if a := nd.Egress(s.Backend.Addr()); a.IsValid() {
			t.Src = netip.AddrPortFrom(a, t.Src.Port())
		}
	}
	sent := t
	s.Sent = &sent
	return t, nil
}

// socketChoice is the socket load balancer's endpoint choice: each backend
// of the entry with the same probability, the followed one chosen.
func (w *walk) socketChoice(s *SocketLB, pick int) *Choice {
	c := &Choice{Node: s.Node, Service: s.Service, Set: s.Set, Socket: true, Scheduler: schedulerText(s.Scheduler),
		Candidates: w.uniformCandidates(s.Backends, pick)}
	if s.Affinity > 0 {
		c.Affinity = fmt.Sprintf("sessionAffinity ClientIP: the socket load balancer keeps this client (its network namespace) on the backend of its last connect for %s", s.Affinity)
	}
	for _, cand := range c.Candidates {
		if cand.Terminating {
			c.Set += " (serving terminating endpoints: no ready endpoint left)"
			break
		}
	}
	return c
}

// uniformCandidates are backends as a choice's candidates, each with the
// same probability, the one at pick chosen, named by their pods.
func (w *walk) uniformCandidates(backends []netip.AddrPort, pick int) []Candidate {
	p := big.NewRat(1, int64(len(backends)))
	pf, _ := p.Float64()
	out := make([]Candidate, 0, len(backends))
	for i, be := range backends {
		cand := Candidate{Endpoint: be.String(), Probability: p.RatString(), P: pf, Chosen: i == pick}
		if pod := w.e.Net.PodByIP(be.Addr()); pod != nil {
			cand.Pod, cand.Node, cand.Terminating = pod.Key, pod.Node, pod.Terminating
		}
		out = append(out, cand)
	}
	return out
}

// refusedHop is the sender's hop when the socket load balancer refuses the
// connect: no packet is sent.
func refusedHop(from Place, t Tuple, s *SocketLB) (Hop, Verdict) {
	why := fmt.Sprintf("the socket load balancer (%s of node %s) refuses the connect with ECONNREFUSED: %s has no endpoints; no packet is sent", s.Hook, s.Node, s.Service)
	end := "rejected: connect() fails with ECONNREFUSED (no backends); no packet is sent"
	h := Hop{Place: from, Arrive: t, End: end}
	return h, Verdict{Kind: Rejected, Place: from.String(), Reason: why}
}

// socketNote says why the socket load balancer left a frontend to the
// rules.
func socketNote(s *SocketLB) string {
	return fmt.Sprintf("the socket load balancer (%s of node %s) leaves %s/%s to the nftables rules: %s", s.Hook, s.Node, s.Frontend, s.Proto, s.Left)
}

// schedulerText says how a socket load balancer entry of scheduler s
// chooses.
func schedulerText(s string) string {
	switch socklb.Scheduler(s) {
	case socklb.RoundRobin:
		return "in turn per connect (round robin, svcnet.io/scheduler)"
	case socklb.SourceHash:
		return "by a hash of the client, its network namespace (source hash, svcnet.io/scheduler)"
	case socklb.LeastConn:
		return "the one with the fewest open connections through this frontend (least connection, svcnet.io/scheduler)"
	case socklb.Random:
		return "uniformly at random, per connect (svcnet.io/scheduler)"
	}
	return "uniformly at random, per connect (unless the proxy's --ebpf-scheduler says otherwise)"
}

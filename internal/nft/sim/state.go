package sim

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// state is what the kernel remembers between packets: elements added to
// dynamic sets, and connections.
type state struct {
	dyn   map[dynKey]dynElem
	flows map[tuple]flowRef
}

func newState() *state {
	return &state{dyn: map[dynKey]dynElem{}, flows: map[tuple]flowRef{}}
}

// clone returns an independent copy (elements and flows are values).
func (s *state) clone() *state {
	return &state{dyn: maps.Clone(s.dyn), flows: maps.Clone(s.flows)}
}

// dynKey identifies an element of a dynamic set by its rendered key.
type dynKey struct {
	family     ipfamily.Family
	table, set string
	key        string
}

// dynElem is an element added by `update`; it lives until expires, or for
// ever when its set has no timeout.
type dynElem struct {
	expires time.Time
	forever bool
}

func (e dynElem) liveAt(now time.Time) bool { return e.forever || now.Before(e.expires) }

// tuple is one direction of a connection as conntrack keys it.
type tuple struct {
	family   ipfamily.Family
	proto    uint8
	src, dst netip.AddrPort
}

func tupleOf(p Packet) tuple {
	return tuple{family: p.Family, proto: p.Proto, src: p.Src, dst: p.Dst}
}

// Flow is a connection conntrack remembers: the original direction as the
// first packet arrived, and the reply direction expected back (after NAT).
type Flow struct {
	Family ipfamily.Family
	Proto  uint8
	// OrigSrc → OrigDst is the first packet before any translation.
	OrigSrc, OrigDst netip.AddrPort
	// ReplySrc → ReplyDst is what an answer looks like on the wire: ReplySrc
	// is the translated destination (the endpoint after DNAT), ReplyDst the
	// translated source (the masquerade address).
	ReplySrc, ReplyDst netip.AddrPort
}

func (f Flow) orig() tuple {
	return tuple{family: f.Family, proto: f.Proto, src: f.OrigSrc, dst: f.OrigDst}
}

func (f Flow) reply() tuple {
	return tuple{family: f.Family, proto: f.Proto, src: f.ReplySrc, dst: f.ReplyDst}
}

// flowRef is a flow and which of its directions a tuple is.
type flowRef struct {
	flow  Flow
	reply bool
}

// addFlow records the connection of an accepted first packet: orig as it
// arrived, final after every translation. An existing flow with either tuple
// is kept (conntrack would refuse the clash).
func (s *state) addFlow(orig, final Packet) {
	f := Flow{
		Family: orig.Family, Proto: orig.Proto,
		OrigSrc: orig.Src, OrigDst: orig.Dst,
		ReplySrc: final.Dst, ReplyDst: final.Src,
	}
	if _, ok := s.flows[f.orig()]; ok {
		return
	}
	if _, ok := s.flows[f.reply()]; ok {
		return
	}
	s.flows[f.orig()] = flowRef{flow: f}
	if f.reply() != f.orig() {
		s.flows[f.reply()] = flowRef{flow: f, reply: true}
	}
}

// Flows returns the connections the Simulator has seen, sorted.
func (s *Simulator) Flows() []Flow {
	var out []Flow
	for _, r := range s.st.flows {
		if !r.reply {
			out = append(out, r.flow)
		}
	}
	slices.SortFunc(out, func(a, b Flow) int {
		return cmp.Or(
			cmp.Compare(a.Family, b.Family),
			cmp.Compare(a.Proto, b.Proto),
			a.OrigSrc.Compare(b.OrigSrc),
			a.OrigDst.Compare(b.OrigDst),
		)
	})
	return out
}

package trace

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/nftrace"
)

// snatIn reports whether any hop masqueraded the packet: the kernel picks
// the new source port at random (fully-random), even when the address stays
// the same, so later matches leave the port open.
func snatIn(hops []Hop) bool {
	for _, h := range hops {
		if h.TC != nil && h.TC.Action == "dnat+snat" {
			return true // the program's SNAT port is its random choice
		}
		for _, s := range h.Steps {
			if s.Action == "masquerade" {
				return true
			}
		}
	}
	return false
}

// traceMatches says, per node, which packets to mark with nftrace: the packet
// and its reply as they arrive at each node the trace crosses.
func traceMatches(tr *Trace) map[string][]nftrace.Match {
	out := map[string][]nftrace.Match{}
	snat := snatIn(tr.Hops)
	add := func(hops []Hop, reply bool) {
		for i, h := range hops {
			if h.Place.Kind != PlaceNode {
				continue
			}
			// Netfilter meets the packet as the tc program at ingress
			// leaves it.
			arrive := h.Arrive
			if h.TC != nil && !h.TC.PastNetfilter && strings.HasPrefix(h.TC.Hook, "tc ingress") {
				arrive = h.TC.After
			}
			m := arrivalMatch(arrive)
			if (!reply && snatIn(hops[:i])) || (reply && snat) {
				if reply {
					m.Dport = 0
				} else {
					m.Sport = 0
				}
			}
			out[h.Place.Name] = appendNew(out[h.Place.Name], m)
		}
	}
	add(tr.Hops, false)
	add(tr.Reply, true)
	return out
}

func arrivalMatch(t Tuple) nftrace.Match {
	f := ipfamily.IPv4
	if t.Dst.Addr().Is6() {
		f = ipfamily.IPv6
	}
	proto, _ := nft.ProtoNumber(t.Proto)
	return nftrace.Match{Family: f, Proto: proto,
		Src: netip.PrefixFrom(t.Src.Addr(), t.Src.Addr().BitLen()), Dst: netip.PrefixFrom(t.Dst.Addr(), t.Dst.Addr().BitLen()),
		Sport: t.Src.Port(), Dport: t.Dst.Port()}
}

// compareTrace checks every node pass of tr against the kernel's events.
// Only the tables comparedAt names for a node are compared.
func compareTrace(tr *Trace, events map[string][]nftrace.Event, handles map[string]map[string]ruleIndex, comparedAt func(node, table string) bool) []HopCheck {
	var out []HopCheck
	snat := snatIn(tr.Hops)
	check := func(hops []Hop, reply bool) {
		dir := "request"
		if reply {
			dir = "reply"
		}
		for i, h := range hops {
			if h.Place.Kind != PlaceNode {
				continue
			}
			wildSport := !reply && snatIn(hops[:i])
			wildDport := reply && snat
			compared := func(table string) bool { return comparedAt(h.Place.Name, table) }
			exp, keys := expectedSegments(h.Steps, compared)
			got := kernelSegments(events[h.Place.Name], h, reply, wildSport, wildDport, handles[h.Place.Name], keys, compared)
			c := HopCheck{Node: h.Place.Name, Direction: dir, Expected: flatten(canonical(exp)), Kernel: flatten(canonical(got))}
			c.OK = slices.Equal(c.Expected, c.Kernel)
			if h.TC != nil && h.TC.PastNetfilter {
				c.Note = fmt.Sprintf("none expected: %s forwarded the packet past this node's netfilter", h.TC.Hook)
			}
			out = append(out, c)
		}
	}
	check(tr.Hops, false)
	check(tr.Reply, true)
	return out
}

// expectedEvents lists the trace events the kernel emits for the simulated
// steps: one per rule whose evaluation ends other than by a failed match
// (its verdict; nat statements accept, reject drops), one at the end of a
// regular chain (return), one for a base chain's policy.
func expectedSegments(steps []Step, compared func(table string) bool) ([]segment, map[string]string) {
	var segs []segment
	keys := map[string]string{}
	add := func(line string) { segs[len(segs)-1].lines = append(segs[len(segs)-1].lines, line) }
	for _, s := range steps {
		if !compared(s.Table) {
			continue
		}
		if s.Action == "chain" {
			key := s.Hook + " " + s.Detail
			keys[s.Table+" "+s.Chain] = key
			segs = append(segs, segment{key: key})
			continue
		}
		if len(segs) == 0 {
			continue
		}
		if s.Rule < 0 {
			switch s.Action {
			case "policy":
				add(fmt.Sprintf("%s %s policy accept", s.Table, s.Chain))
			case "return":
				add(fmt.Sprintf("%s %s return", s.Table, s.Chain))
			}
			continue
		}
		var v string
		switch s.Action {
		case "continue":
			v = "continue"
		case "accept", "dnat", "masquerade":
			v = "accept"
		case "drop", "reject":
			v = "drop"
		case "return":
			v = "return"
		case "jump", "goto":
			v = s.Action + " " + s.Target
		default:
			continue // no-match, set-mark, update: no event of their own
		}
		add(fmt.Sprintf("%s %s #%d %s", s.Table, s.Chain, s.Rule, v))
	}
	return segs, keys
}

// segment is the events of one base chain's run; key is its hook and
// priority.
type segment struct {
	key   string
	lines []string
}

// canonical orders runs of adjacent base chains of one hook and priority by
// their content: the kernel runs chains of equal priority in the order they
// were registered, which no ruleset records, so the comparison does not
// depend on it.
func canonical(segs []segment) []segment {
	out := slices.Clone(segs)
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].key == out[i].key {
			j++
		}
		slices.SortStableFunc(out[i:j], func(a, b segment) int {
			return strings.Compare(strings.Join(a.lines, "\n"), strings.Join(b.lines, "\n"))
		})
		i = j
	}
	return out
}

func flatten(segs []segment) []string {
	var out []string
	for _, s := range segs {
		out = append(out, s.lines...)
	}
	return out
}

// kernelEvents lists, in the same form, the kernel's events for the packet
// of hop h: those whose headers show the packet at one of its states on the
// node (as it arrived, after each rewrite), for TCP the SYN (request) or
// SYN-ACK (reply) only.
func kernelSegments(evs []nftrace.Event, h Hop, reply, wildSport, wildDport bool, handles map[string]ruleIndex, keys map[string]string, compared func(table string) bool) []segment {
	states := []Tuple{h.Arrive}
	for _, rw := range h.Rewrites {
		states = append(states, rw.Before, rw.After)
	}
	if h.Leave != nil {
		states = append(states, *h.Leave)
	}
	is := func(e nftrace.Packet) bool {
		if p, _ := nft.ProtoNumber(h.Arrive.Proto); p != e.Proto {
			return false
		}
		if e.Proto == nft.ProtoTCP {
			syn, ack := e.TCPFlags&0x02 != 0, e.TCPFlags&0x10 != 0
			if !syn || ack != reply {
				return false
			}
		}
		for _, t := range states {
			if t.Src.Addr() != e.Src.Addr() || t.Dst.Addr() != e.Dst.Addr() {
				continue
			}
			if (wildSport || t.Src.Port() == e.Src.Port()) && (wildDport || t.Dst.Port() == e.Dst.Port()) {
				return true
			}
		}
		return false
	}
	// Only the first event of a base chain's run carries the packet; the
	// others of that run share its ID.
	cur := map[uint32]*nftrace.Packet{}
	var sel []nftrace.Event
	for _, e := range evs {
		if e.Packet != nil {
			cur[e.ID] = e.Packet
		}
		if p := cur[e.ID]; p != nil && compared(e.Table) && is(*p) {
			sel = append(sel, e)
		}
	}
	var out []segment
	for i, e := range sel {
		if e.Packet != nil || len(out) == 0 { // the first event of a base chain's run
			key, ok := keys[e.Table+" "+e.Chain]
			if !ok {
				key = "? " + e.Table + " " + e.Chain
			}
			out = append(out, segment{key: key})
		}
		if isChainEnd(e) && i+1 < len(sel) && sel[i+1].Type == nftrace.TypePolicy && sel[i+1].Chain == e.Chain {
			continue // a base chain's end, reported again by its policy event
		}
		out[len(out)-1].lines = append(out[len(out)-1].lines, eventLine(e, handles))
	}
	return out
}

// ruleIndex maps a table's rule handles to rule indexes, over the
// generations of the table read (handles are never reused, so a handle
// belongs to one rule of one generation): a chain rewritten with the same
// rules between the read-back and the probe keeps its indexes.
type ruleIndex []nftrace.Handles

// Index returns the index of the rule with handle h in chain, or -1.
func (r ruleIndex) Index(chain string, h uint64) int {
	for _, g := range r {
		if i := g.Index(chain, h); i >= 0 {
			return i
		}
	}
	return -1
}

// isChainEnd reports whether e is the kernel's event for the end of a chain
// (no rule: handle 0), as opposed to a rule's or a policy's.
func isChainEnd(e nftrace.Event) bool {
	return e.Type != nftrace.TypePolicy && e.Handle == 0
}

// eventLine renders a kernel trace event as expectedEvents renders a step.
func eventLine(e nftrace.Event, handles map[string]ruleIndex) string {
	switch e.Type {
	case nftrace.TypePolicy:
		return fmt.Sprintf("%s %s policy %s", e.Table, e.Chain, e.Policy)
	}
	if isChainEnd(e) {
		return fmt.Sprintf("%s %s return", e.Table, e.Chain)
	}
	idx := -1
	if f, ok := e.Family.Family(); ok {
		if h, ok := handles[f.String()+" "+e.Table]; ok {
			idx = h.Index(e.Chain, e.Handle)
		}
	}
	v := e.Verdict.Code.String()
	if e.Verdict.Chain != "" {
		v += " " + e.Verdict.Chain
	}
	if idx < 0 {
		return fmt.Sprintf("%s %s handle %d %s", e.Table, e.Chain, e.Handle, v)
	}
	return fmt.Sprintf("%s %s #%d %s", e.Table, e.Chain, idx, v)
}

package sim

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// evalRule evaluates rule i of chain c left to right: a match that fails ends
// the rule (next rule); statements take effect in order (their steps are
// recorded here); a verdict, vmap hit, nat statement or reject ends it. The
// outcome step is returned for evalBase to record.
func (w *walker) evalRule(h Hook, t *nft.Table, c *nft.Chain, i int) (outcome, error) {
	r := c.Rules[i]
	s := Step{Hook: h, Table: t.Name, Chain: c.Name, Rule: i, Text: w.sim.ruleText(w.fam, r)}
	with := func(a Action, detail string) Step {
		x := s
		x.Action, x.Detail = a, detail
		return x
	}
	noMatch := func(e nft.Expr, why string) outcome {
		return outcome{kind: outContinue, step: with(ActNoMatch, nft.RenderExpr(w.fam, e)+": "+why)}
	}
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case nft.AddrMatch:
			a, err := w.addr(e.Field)
			if err != nil {
				return outcome{}, err
			}
			if e.Prefix.Contains(a) == e.Neq {
				return noMatch(e, fmt.Sprintf("%s is %s", fieldName(e.Field), a)), nil
			}
		case nft.ProtoMatch:
			if w.pkt.Proto != e.Proto {
				return noMatch(e, "l4proto is "+protoName(w.pkt.Proto)), nil
			}
		case nft.PortMatch:
			p, err := w.port(e.Field)
			if err != nil {
				return outcome{}, err
			}
			if p != e.Port {
				return noMatch(e, fmt.Sprintf("%s is %d", fieldName(e.Field), p)), nil
			}
		case nft.CtStateMatch:
			if w.pkt.CtState&e.States == 0 {
				return noMatch(e, "ct state is "+ctName(w.pkt.CtState)), nil
			}
		case nft.FibLocal:
			a := w.pkt.Dst.Addr()
			if e.Saddr {
				a = w.pkt.Src.Addr()
			}
			if !w.isLocal(a) {
				return noMatch(e, a.String()+" is not local"), nil
			}
		case nft.IifnameMatch:
			name := w.iifname(h)
			if ifnameMatches(e, name) == e.Neq {
				return noMatch(e, fmt.Sprintf("iifname is %q", name)), nil
			}
		case nft.MarkMatch:
			if (w.pkt.Mark&e.Mask == e.Value) == e.Neq {
				return noMatch(e, fmt.Sprintf("mark is 0x%08x", w.pkt.Mark)), nil
			}
		case nft.Random:
			if e.Mod == 0 {
				return outcome{}, fmt.Errorf("numgen random mod 0: %w", ErrBadRuleset)
			}
			ok, why := w.ch.random(e.Mod, e.Value)
			if !ok {
				return noMatch(e, why), nil
			}
		case nft.Lookup:
			in, key, err := w.lookup(t, e.Set, e.Fields)
			if err != nil {
				return outcome{}, err
			}
			if in == e.Neq {
				why := key + " is not in the set"
				if in {
					why = key + " is in the set"
				}
				return noMatch(e, why), nil
			}
		case nft.VMap:
			el, key, err := w.vmap(t, e)
			if err != nil {
				return outcome{}, err
			}
			if el == nil {
				return noMatch(e, "no element "+key), nil
			}
			return verdictOutcome(*el.Verdict, with(0, key+" : "+el.Verdict.String()))
		case nft.Verdict:
			return verdictOutcome(e, with(0, ""))
		case nft.SetMark:
			w.setMark(e, with(ActSetMark, ""))
		case nft.Update:
			if err := w.update(t, e, with(ActUpdate, "")); err != nil {
				return outcome{}, err
			}
		case nft.Counter:
		case nft.SetNftrace:
			// Only makes the kernel report the packet's path; the walk
			// is the same with or without it.
		case nft.DNAT:
			return w.dnat(h, t, c, i, e, with(ActDNAT, ""))
		case nft.Redirect:
			return w.redirect(h, t, c, i, e, with(ActDNAT, ""))
		case nft.Masquerade:
			return w.masquerade(h, t, c, i, e, with(ActMasquerade, ""))
		case nft.Reject:
			k, why := RejectICMP, "icmp port-unreachable"
			if w.fam == ipfamily.IPv6 {
				why = "icmpv6 port-unreachable"
			}
			if e.TCPReset {
				k, why = RejectTCPReset, "tcp reset"
				if w.pkt.Proto != nft.ProtoTCP {
					why += " (the packet is not tcp: nothing is sent)"
				}
			}
			return outcome{kind: outReject, reject: k, step: with(ActReject, why)}, nil
		default:
			return outcome{}, fmt.Errorf("expression %T: %w", e, ErrBadRuleset)
		}
	}
	return outcome{kind: outContinue, step: with(ActContinue, "matched")}, nil
}

func fieldName(f nft.Field) string {
	switch f {
	case nft.FieldSaddr:
		return "saddr"
	case nft.FieldDaddr:
		return "daddr"
	case nft.FieldL4Proto:
		return "l4proto"
	case nft.FieldDport:
		return "dport"
	case nft.FieldSport:
		return "sport"
	}
	return fmt.Sprintf("field(%d)", f)
}

func (w *walker) addr(f nft.Field) (netip.Addr, error) {
	switch f {
	case nft.FieldSaddr:
		return w.pkt.Src.Addr(), nil
	case nft.FieldDaddr:
		return w.pkt.Dst.Addr(), nil
	}
	return netip.Addr{}, fmt.Errorf("address match on %s: %w", fieldName(f), ErrBadRuleset)
}

func (w *walker) port(f nft.Field) (uint16, error) {
	switch f {
	case nft.FieldSport:
		return w.pkt.Src.Port(), nil
	case nft.FieldDport:
		return w.pkt.Dst.Port(), nil
	}
	return 0, fmt.Errorf("port match on %s: %w", fieldName(f), ErrBadRuleset)
}

// value returns the packet's value of field f.
func (w *walker) value(f nft.Field) (nft.Value, error) {
	switch f {
	case nft.FieldSaddr, nft.FieldDaddr:
		a, err := w.addr(f)
		return nft.A(a), err
	case nft.FieldL4Proto:
		return nft.N(uint32(w.pkt.Proto)), nil
	case nft.FieldSport, nft.FieldDport:
		p, err := w.port(f)
		return nft.N(uint32(p)), err
	}
	return nft.Value{}, fmt.Errorf("%s: %w", fieldName(f), ErrBadRuleset)
}

// key returns set name's definition and the packet's key for it from fields,
// rendered as the set's element keys are.
func (w *walker) key(t *nft.Table, name string, fields []nft.Field) (*nft.Set, string, error) {
	set, ok := t.Sets[name]
	if !ok {
		return nil, "", fmt.Errorf("set %s: no such set: %w", name, ErrBadRuleset)
	}
	if len(fields) != len(set.Key) {
		return nil, "", fmt.Errorf("set %s: key of %d fields looked up with %d: %w", name, len(set.Key), len(fields), ErrBadRuleset)
	}
	vals := make([]nft.Value, len(fields))
	for i, f := range fields {
		v, err := w.value(f)
		if err != nil {
			return nil, "", err
		}
		vals[i] = v
	}
	return set, nft.KeyString(w.fam, set.Key, vals), nil
}

// lookup reports whether the packet's key is in set name: a static element,
// or one added by `update` that has not expired.
func (w *walker) lookup(t *nft.Table, name string, fields []nft.Field) (bool, string, error) {
	set, key, err := w.key(t, name, fields)
	if err != nil {
		return false, "", err
	}
	if set.Verdict {
		return false, "", fmt.Errorf("set %s: is a verdict map: %w", name, ErrBadRuleset)
	}
	if _, ok := set.Elements[key]; ok {
		return true, key, nil
	}
	e, ok := w.st.dyn[dynKey{family: w.fam, table: t.Name, set: name, key: key}]
	return ok && e.liveAt(w.now), key, nil
}

// vmap returns the element of the verdict map matching the packet, or nil.
func (w *walker) vmap(t *nft.Table, e nft.VMap) (*nft.Element, string, error) {
	set, key, err := w.key(t, e.Map, e.Fields)
	if err != nil {
		return nil, "", err
	}
	if !set.Verdict {
		return nil, "", fmt.Errorf("map %s: is not a verdict map: %w", e.Map, ErrBadRuleset)
	}
	el, ok := set.Elements[key]
	if !ok {
		return nil, key, nil
	}
	if el.Verdict == nil {
		return nil, "", fmt.Errorf("map %s: element %s has no verdict: %w", e.Map, key, ErrBadRuleset)
	}
	return &el, key, nil
}

func (w *walker) setMark(e nft.SetMark, s Step) {
	before := w.pkt
	switch e.Op {
	case nft.MarkXor:
		w.pkt.Mark ^= e.Value
	default:
		w.pkt.Mark |= e.Value
	}
	after := w.pkt
	s.Before, s.After = &before, &after
	s.Detail = fmt.Sprintf("mark 0x%08x → 0x%08x", before.Mark, after.Mark)
	w.step(s)
}

// update adds the packet's key to a dynamic set, or refreshes its timeout.
func (w *walker) update(t *nft.Table, e nft.Update, s Step) error {
	set, key, err := w.key(t, e.Set, e.Fields)
	if err != nil {
		return err
	}
	if set.Verdict {
		return fmt.Errorf("set %s: update of a verdict map: %w", e.Set, ErrBadRuleset)
	}
	k := dynKey{family: w.fam, table: t.Name, set: e.Set, key: key}
	old, had := w.st.dyn[k]
	el := dynElem{forever: set.Timeout <= 0, expires: w.now.Add(set.Timeout)}
	w.st.dyn[k] = el
	verb := "added"
	if had && old.liveAt(w.now) {
		verb = "refreshed"
	}
	s.Detail = fmt.Sprintf("%s %s in @%s", verb, key, e.Set)
	if !el.forever {
		s.Detail += fmt.Sprintf(", expires in %s", set.Timeout)
	}
	w.step(s)
	return nil
}

// iifname is the input interface's name as `meta iifname` reads it at hook
// h: none (empty) in output and postrouting, where netfilter passes no input
// device; "lo" for a locally sent packet that came back in to a local
// address; else the interface the packet arrived on.
func (w *walker) iifname(h Hook) string {
	switch {
	case h == HookOutput || h == HookPostrouting:
		return ""
	case w.ctx.Path == PathOutput:
		return "lo"
	}
	return w.ctx.InIface
}

// ifnameMatches reports whether name equals e.Name, or starts with it for a
// prefix match.
func ifnameMatches(e nft.IifnameMatch, name string) bool {
	if e.Prefix {
		return strings.HasPrefix(name, e.Name)
	}
	return name == e.Name
}

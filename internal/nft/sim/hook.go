package sim

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// natPriority is the priority at which the kernel registers its NAT hook:
// NF_IP_PRI_NAT_DST (-100) at prerouting and output, NF_IP_PRI_NAT_SRC (100) at
// postrouting and input. Every nat base chain of the hook runs inside it.
func natPriority(h Hook) int {
	if manipOf(h) == manipDst {
		return -100
	}
	return 100
}

// baseChain is a base chain and its table.
type baseChain struct {
	table *nft.Table
	chain *nft.Chain
}

// compareBase orders base chains as the kernel runs them: by priority; at
// equal priority the later registered first (nf_hook_entries_grow inserts a
// new hook before those of its priority), which for tables read back from
// the kernel is the higher table handle; else by table and chain name.
func compareBase(a, b baseChain) int {
	return cmp.Or(
		cmp.Compare(a.chain.Hook.Priority, b.chain.Hook.Priority),
		cmp.Compare(b.table.Handle, a.table.Handle),
		cmp.Compare(a.table.Name, b.table.Name),
		cmp.Compare(a.chain.Name, b.chain.Name),
	)
}

// familyHooks is the base chains of one family's tables, by hook, each list
// sorted by priority, then table and chain name.
type familyHooks struct {
	filter, nat map[Hook][]baseChain
	// natActive: some nat chain exists, so the kernel's NAT hooks are
	// registered at every hook of the family.
	natActive bool
}

// indexHooks sorts the base chains of tables by family and hook.
func indexHooks(tables []*nft.Table) map[ipfamily.Family]*familyHooks {
	out := map[ipfamily.Family]*familyHooks{}
	for _, t := range tables {
		if t == nil {
			continue
		}
		fh := out[t.Family]
		if fh == nil {
			fh = &familyHooks{filter: map[Hook][]baseChain{}, nat: map[Hook][]baseChain{}}
			out[t.Family] = fh
		}
		for _, c := range t.Chains {
			if c.Hook == nil {
				continue
			}
			h := Hook(c.Hook.Hook)
			if c.Hook.Type == "nat" {
				fh.nat[h] = append(fh.nat[h], baseChain{t, c})
				fh.natActive = true
			} else {
				fh.filter[h] = append(fh.filter[h], baseChain{t, c})
			}
		}
	}
	for _, fh := range out {
		for _, l := range fh.filter {
			slices.SortFunc(l, compareBase)
		}
		for _, l := range fh.nat {
			slices.SortFunc(l, compareBase)
		}
	}
	return out
}

// hook runs the packet through hook h: filter chains in priority order, with
// the NAT hook (at every hook but forward, when some nat chain exists) at its
// fixed priority, after filter chains of equal priority.
// It reports whether the packet goes on.
func (w *walker) hook(h Hook) (bool, error) {
	w.step(Step{Hook: h, Rule: -1, Action: ActHook, Detail: w.pkt.String()})
	filter, nat := w.hooks.filter[h], w.hooks.nat[h]
	if h == HookForward && len(nat) > 0 {
		bc := nat[0]
		return false, fmt.Errorf("table %s %s chain %s: nat chain at forward: %w", nft.Keyword(w.fam), bc.table.Name, bc.chain.Name, ErrBadRuleset)
	}
	natDone := !w.hooks.natActive || h == HookForward
	for _, bc := range filter {
		if !natDone && bc.chain.Hook.Priority > natPriority(h) {
			natDone = true
			if ok, err := w.natHook(h, nat); !ok || err != nil {
				return ok, err
			}
		}
		if ok, err := w.runBase(h, bc); !ok || err != nil {
			return ok, err
		}
	}
	if !natDone {
		return w.natHook(h, nat)
	}
	return true, nil
}

// runBase evaluates one base chain and reports whether the packet goes on.
func (w *walker) runBase(h Hook, bc baseChain) (bool, error) {
	f, err := w.evalBase(h, bc)
	if err != nil {
		return false, err
	}
	switch f.verdict {
	case Dropped, Rejected:
		w.end(f.verdict, f.reject)
		return false, nil
	}
	return true, nil
}

// natHook is the kernel's NAT hook (nf_nat_inet_fn): for the first packet of a
// connection whose translation of this kind is not yet bound, it runs the nat
// chains in priority order until one binds it, and binds "no translation"
// when none does. Otherwise it skips the nat chains and applies the bound
// translation, if any.
func (w *walker) natHook(h Hook, nat []baseChain) (bool, error) {
	m := manipOf(h)
	if w.pkt.CtState == nft.CtNew && !w.bind[m].set {
		for _, bc := range nat {
			if w.bind[m].set {
				w.skipNAT(h, bc, "translation already bound by "+w.bind[m].by)
				continue
			}
			if ok, err := w.runBase(h, bc); !ok || err != nil {
				return ok, err
			}
		}
		if !w.bind[m].set {
			w.bind[m] = binding{set: true, at: h, by: "no nat rule (no translation)", to: w.field(m)}
		}
		return true, nil
	}
	var why string
	switch {
	case w.pkt.CtState == nft.CtInvalid:
		why = "ct state invalid: no connection, no nat"
	case w.pkt.CtState != nft.CtNew:
		why = fmt.Sprintf("ct state %s: nat chains run only for the first packet of a connection", ctName(w.pkt.CtState))
	default:
		why = fmt.Sprintf("translation already bound at %s by %s", w.bind[m].at, w.bind[m].by)
	}
	for _, bc := range nat {
		w.skipNAT(h, bc, why)
	}
	if b := w.bind[m]; b.set && w.pkt.CtState != nft.CtInvalid && b.to != w.field(m) {
		before := w.pkt
		w.setField(m, b.to)
		after := w.pkt
		w.step(Step{Hook: h, Rule: -1, Action: ActConntrack, Before: &before, After: &after,
			Detail: fmt.Sprintf("%s: %s", b.by, rewriteDetail(m, before, after))})
	}
	return true, nil
}

func (w *walker) skipNAT(h Hook, bc baseChain, why string) {
	w.step(Step{Hook: h, Table: bc.table.Name, Chain: bc.chain.Name, Rule: -1, Action: ActNATSkip, Detail: why})
}

// field returns the address a translation of kind m rewrites.
func (w *walker) field(m manip) netip.AddrPort {
	if m == manipDst {
		return w.pkt.Dst
	}
	return w.pkt.Src
}

func (w *walker) setField(m manip, a netip.AddrPort) {
	if m == manipDst {
		w.pkt.Dst = a
	} else {
		w.pkt.Src = a
	}
}

func rewriteDetail(m manip, before, after Packet) string {
	if m == manipDst {
		return fmt.Sprintf("daddr %s → %s", before.Dst, after.Dst)
	}
	return fmt.Sprintf("saddr %s → %s", before.Src, after.Src)
}

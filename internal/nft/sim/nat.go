package sim

import (
	"fmt"
	"net/netip"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// dnat binds and applies the connection's destination translation. The
// kernel accepts dnat only in nat chains at prerouting and output; it ends
// the base chain with accept, and no later nat chain of the hook runs.
func (w *walker) dnat(h Hook, t *nft.Table, c *nft.Chain, i int, e nft.DNAT, s Step) (outcome, error) {
	if w.base.Hook.Type != "nat" || (h != HookPrerouting && h != HookOutput) {
		return outcome{}, fmt.Errorf("dnat in base chain %s (type %s hook %s): %w", w.base.Name, w.base.Hook.Type, h, ErrBadRuleset)
	}
	if !e.To.Addr().IsValid() || e.To.Addr().Is4() != (w.fam == ipfamily.IPv4) {
		return outcome{}, fmt.Errorf("dnat to %s: not an address of family %s: %w", e.To, nft.Keyword(w.fam), ErrBadRuleset)
	}
	to := e.To
	if to.Port() == 0 {
		to = netip.AddrPortFrom(to.Addr(), w.pkt.Dst.Port())
	}
	before := w.pkt
	w.pkt.Dst = to
	after := w.pkt
	w.bind[manipDst] = binding{set: true, at: h, by: fmt.Sprintf("%s %s rule %d", t.Name, c.Name, i), to: to}
	s.Before, s.After = &before, &after
	s.Detail = rewriteDetail(manipDst, before, after)
	return outcome{kind: outNAT, step: s}, nil
}

// redirect is a dnat to a local address the kernel chooses, as
// nf_nat_redirect does: for a locally generated packet (output hook) the
// loopback address of the family, else the primary address of the interface
// the packet arrived on (Context.IfaceAddr), the packet dropped when that
// interface has none.
func (w *walker) redirect(h Hook, t *nft.Table, c *nft.Chain, i int, e nft.Redirect, s Step) (outcome, error) {
	if w.base.Hook.Type != "nat" || (h != HookPrerouting && h != HookOutput) {
		return outcome{}, fmt.Errorf("redirect in base chain %s (type %s hook %s): %w", w.base.Name, w.base.Hook.Type, h, ErrBadRuleset)
	}
	if e.Port == 0 {
		return outcome{}, fmt.Errorf("redirect to port 0: %w", ErrBadRuleset)
	}
	var to netip.Addr
	switch {
	case h == HookOutput && w.fam == ipfamily.IPv6:
		to = netip.IPv6Loopback()
	case h == HookOutput:
		to = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case w.ctx.IfaceAddr != nil:
		to = w.ctx.IfaceAddr(w.iifname(h), w.fam).Unmap()
	}
	if !to.IsValid() || to.Is4() != (w.fam == ipfamily.IPv4) {
		s.Action = ActDrop
		s.Detail = fmt.Sprintf("redirect: interface %q has no %s address", w.iifname(h), w.fam)
		return outcome{kind: outDrop, step: s}, nil
	}
	o, err := w.dnat(h, t, c, i, nft.DNAT{To: netip.AddrPortFrom(to, e.Port)}, s)
	if err == nil {
		o.step.Detail = "redirect: " + o.step.Detail
	}
	return o, err
}

// masquerade binds and applies the connection's source translation to the
// egress address for the destination, keeping the source port (port
// allocation is not modelled). The kernel accepts it only in nat chains at
// postrouting; it ends the base chain with accept. Without an egress address
// the packet is dropped, as the kernel does.
func (w *walker) masquerade(h Hook, t *nft.Table, c *nft.Chain, i int, e nft.Masquerade, s Step) (outcome, error) {
	if w.base.Hook.Type != "nat" || h != HookPostrouting {
		return outcome{}, fmt.Errorf("masquerade in base chain %s (type %s hook %s): %w", w.base.Name, w.base.Hook.Type, h, ErrBadRuleset)
	}
	var egress netip.Addr
	if w.ctx.EgressAddr != nil {
		egress = w.ctx.EgressAddr(w.pkt.Dst.Addr()).Unmap()
	}
	if !egress.IsValid() || egress.Is4() != (w.fam == ipfamily.IPv4) {
		s.Action = ActDrop
		s.Detail = fmt.Sprintf("masquerade: no %s address to leave for %s with", w.fam, w.pkt.Dst.Addr())
		return outcome{kind: outDrop, step: s}, nil
	}
	to := netip.AddrPortFrom(egress, w.pkt.Src.Port())
	before := w.pkt
	w.pkt.Src = to
	after := w.pkt
	w.bind[manipSrc] = binding{set: true, at: h, by: fmt.Sprintf("%s %s rule %d", t.Name, c.Name, i), to: to}
	s.Before, s.After = &before, &after
	s.Detail = rewriteDetail(manipSrc, before, after)
	if e.FullyRandom {
		s.Detail += " (fully-random: the kernel may pick another port)"
	}
	return outcome{kind: outNAT, step: s}, nil
}

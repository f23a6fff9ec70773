package sim

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// ErrBadInput is wrapped by errors about the packet or context given.
var ErrBadInput = errors.New("bad simulation input")

// ErrBadRuleset is wrapped by errors about rules the kernel would not have
// loaded: a jump to a missing or base chain, a lookup of a missing set, a nat
// statement outside a nat chain of its hook, jumps nested too deep, a loop.
var ErrBadRuleset = errors.New("ruleset cannot be simulated")

// Simulator walks packets through a fixed set of tables, remembering, as the
// kernel does, connections and elements added to dynamic sets.
type Simulator struct {
	hooks map[ipfamily.Family]*familyHooks
	now   func() time.Time
	st    *state
	// texts caches rendered rules (rules are immutable values).
	texts map[ruleKey]string
}

type ruleKey struct {
	fam  ipfamily.Family
	rule *nft.Rule
}

// ruleText returns r rendered for family f, or its Source when it has one.
func (s *Simulator) ruleText(f ipfamily.Family, r *nft.Rule) string {
	if r.Source != "" {
		return r.Source
	}
	k := ruleKey{f, r}
	t, ok := s.texts[k]
	if !ok {
		t = r.Render(f)
		s.texts[k] = t
	}
	return t
}

// New returns a Simulator over tables (of either family; a packet meets only
// those of its own) with no remembered state. now is the clock for dynamic set
// timeouts; nil stands for a clock that never moves.
func New(now func() time.Time, tables ...*nft.Table) *Simulator {
	if now == nil {
		now = func() time.Time { return time.Time{} }
	}
	return &Simulator{hooks: indexHooks(tables), now: now, st: newState(), texts: map[ruleKey]string{}}
}

// Run walks one packet through the node and returns what happened. Its
// effects on state (a new connection, `update`d set elements) are kept for
// later packets when it succeeds. An error (ErrBadInput, ErrBadRuleset)
// leaves the state unchanged.
func (s *Simulator) Run(ctx Context, p Packet) (Result, error) {
	st := s.st.clone()
	res, err := s.simulate(ctx, p, randChooser{fn: ctx.Rand}, st)
	if err != nil {
		return Result{}, err
	}
	s.st = st
	return res, nil
}

// simulate walks p with randomness from ch, reading and changing st.
func (s *Simulator) simulate(ctx Context, p Packet, ch chooser, st *state) (Result, error) {
	if err := checkInput(ctx, p); err != nil {
		return Result{}, err
	}
	w := &walker{
		sim: s, ctx: ctx, st: st, ch: ch, now: s.now(),
		fam: p.Family, pkt: p, budget: maxRuleEvals,
	}
	if w.hooks = s.hooks[p.Family]; w.hooks == nil {
		w.hooks = &familyHooks{}
	}
	w.classify()
	w.res.Initial = w.pkt
	if err := w.walk(); err != nil {
		return Result{}, err
	}
	w.res.Final = w.pkt
	if w.res.Verdict == Accepted && w.pkt.CtState == nft.CtNew {
		st.addFlow(w.res.Initial, w.res.Final)
	}
	return w.res, nil
}

func checkInput(ctx Context, p Packet) error {
	if ctx.Path != PathPrerouting && ctx.Path != PathOutput {
		return fmt.Errorf("context: path %s: %w", ctx.Path, ErrBadInput)
	}
	if ctx.Path == PathOutput && ctx.InIface != "" {
		return fmt.Errorf("context: input interface %q on path %s (a locally sent packet has none): %w", ctx.InIface, ctx.Path, ErrBadInput)
	}
	if p.Family != ipfamily.IPv4 && p.Family != ipfamily.IPv6 {
		return fmt.Errorf("packet: family %d: %w", p.Family, ErrBadInput)
	}
	for _, a := range []netip.AddrPort{p.Src, p.Dst} {
		if !a.IsValid() || a.Addr().Is4() != (p.Family == ipfamily.IPv4) || a.Addr().Is4In6() {
			return fmt.Errorf("packet: address %s is not of family %s: %w", a, p.Family, ErrBadInput)
		}
	}
	return nil
}

// maxRuleEvals bounds the rules one packet evaluates, so a goto loop (which
// the kernel refuses to load) ends in an error rather than a hang.
const maxRuleEvals = 1 << 16

// walker is one packet's walk.
type walker struct {
	sim    *Simulator
	ctx    Context
	st     *state
	ch     chooser
	now    time.Time
	fam    ipfamily.Family
	hooks  *familyHooks
	pkt    Packet
	res    Result
	budget int
	// bind is the connection's NAT binding per manipulation (dst, src).
	bind [2]binding
	// base is the base chain being evaluated.
	base *nft.Chain
}

// manip is a kind of NAT translation.
type manip uint8

const (
	manipDst manip = iota // at prerouting and output
	manipSrc              // at postrouting and input
)

func manipOf(h Hook) manip {
	if h == HookPrerouting || h == HookOutput {
		return manipDst
	}
	return manipSrc
}

// binding is a connection's translation of one kind, once decided: to is the
// new address (destination for manipDst, source for manipSrc).
type binding struct {
	set bool
	at  Hook   // where it was bound ("" for a known connection's)
	by  string // what bound it, for the trace
	to  netip.AddrPort
}

// classify resolves the conntrack state and, for a packet of a known
// connection, takes the connection's translations.
func (w *walker) classify() {
	want := w.pkt.CtState
	if want == nft.CtNew || want == nft.CtInvalid {
		return
	}
	ref, ok := w.st.flows[tupleOf(w.pkt)]
	if !ok {
		if want == 0 {
			w.pkt.CtState = nft.CtNew
		}
		return
	}
	if want == 0 {
		w.pkt.CtState = nft.CtEstablished
	}
	f := ref.flow
	by := fmt.Sprintf("connection %s %s → %s", protoName(f.Proto), f.OrigSrc, f.OrigDst)
	if ref.reply {
		w.bind[manipDst] = binding{set: true, by: by, to: f.OrigSrc}
		w.bind[manipSrc] = binding{set: true, by: by, to: f.OrigDst}
	} else {
		w.bind[manipDst] = binding{set: true, by: by, to: f.ReplySrc}
		w.bind[manipSrc] = binding{set: true, by: by, to: f.ReplyDst}
	}
}

// walk takes the packet through the hooks of its path.
func (w *walker) walk() error {
	if w.ctx.Path == PathOutput {
		if ok, err := w.hook(HookOutput); !ok || err != nil {
			return err
		}
		local := w.route("output")
		if ok, err := w.hook(HookPostrouting); !ok || err != nil {
			return err
		}
		if !local {
			w.deliver(DeliverOut)
			return nil
		}
	}
	if ok, err := w.hook(HookPrerouting); !ok || err != nil {
		return err
	}
	if w.route("prerouting") {
		if ok, err := w.hook(HookInput); !ok || err != nil {
			return err
		}
		w.deliver(DeliverLocal)
		return nil
	}
	if ok, err := w.hook(HookForward); !ok || err != nil {
		return err
	}
	if ok, err := w.hook(HookPostrouting); !ok || err != nil {
		return err
	}
	w.deliver(DeliverForward)
	return nil
}

func (w *walker) deliver(d Delivery) {
	w.res.Verdict = Accepted
	w.res.Delivery = d
}

// route records the routing decision after hook from and reports whether the
// destination is local.
func (w *walker) route(from string) bool {
	dst := w.pkt.Dst.Addr()
	local := w.isLocal(dst)
	var d string
	switch {
	case local && from == "output":
		d = fmt.Sprintf("%s is local: loopback, back in at prerouting", dst)
	case local:
		d = fmt.Sprintf("%s is local: input", dst)
	case from == "output":
		d = fmt.Sprintf("%s is not local: out of the node", dst)
	default:
		d = fmt.Sprintf("%s is not local: forward", dst)
	}
	w.step(Step{Hook: HookRouting, Rule: -1, Action: ActRoute, Detail: d})
	return local
}

// isLocal reports whether a is an address of the node.
func (w *walker) isLocal(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	for _, l := range w.ctx.LocalAddrs {
		if l.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

func (w *walker) step(s Step) { w.res.Trace = append(w.res.Trace, s) }

// end records the packet's end with v.
func (w *walker) end(v Verdict, k RejectKind) {
	w.res.Verdict = v
	w.res.Reject = k
}

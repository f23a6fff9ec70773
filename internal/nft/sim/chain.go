package sim

import (
	"fmt"

	"github.com/svcnet/svcnet/internal/nft"
)

// maxJumpStack is the kernel's NFT_JUMP_STACK_SIZE: jumps nest at most this deep.
const maxJumpStack = 16

// fate is how a base chain ended: Accepted lets the packet go on.
type fate struct {
	verdict Verdict
	reject  RejectKind
}

// outKind is how one rule ended.
type outKind uint8

const (
	outContinue outKind = iota // no match, or matched without a verdict
	outAccept
	outDrop
	outReject
	outReturn
	outJump
	outGoto
	outNAT // dnat or masquerade: accept
)

// outcome is how one rule ended; step is its outcome step, which evalBase
// completes (the Target of a return) and records.
type outcome struct {
	kind   outKind
	target string
	reject RejectKind
	step   Step
}

// evalBase evaluates base chain bc at hook h with nft's verdict semantics:
// accept ends the base chain (the packet goes on), drop and reject end the
// packet, jump pushes, goto replaces the current chain, return (or the end of
// a regular chain) pops, and the base chain's end applies its policy, accept.
func (w *walker) evalBase(h Hook, bc baseChain) (fate, error) {
	t, c := bc.table, bc.chain
	w.base = c
	w.step(Step{Hook: h, Table: t.Name, Chain: c.Name, Rule: -1, Action: ActChain,
		Detail: fmt.Sprintf("type %s hook %s priority %d", c.Hook.Type, c.Hook.Hook, c.Hook.Priority)})
	type frame struct {
		chain *nft.Chain
		next  int
	}
	cur := frame{chain: c}
	var stack []frame
	policy := func() (fate, error) {
		w.step(Step{Hook: h, Table: t.Name, Chain: c.Name, Rule: -1, Action: ActPolicy, Detail: "policy accept"})
		return fate{verdict: Accepted}, nil
	}
	for {
		if cur.next >= len(cur.chain.Rules) {
			if len(stack) == 0 {
				return policy()
			}
			caller := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			w.step(Step{Hook: h, Table: t.Name, Chain: cur.chain.Name, Rule: -1, Action: ActReturn,
				Target: caller.chain.Name, Detail: "end of chain"})
			cur = caller
			continue
		}
		if w.budget--; w.budget < 0 {
			return fate{}, fmt.Errorf("table %s %s chain %s: more than %d rules evaluated, a loop: %w",
				nft.Keyword(w.fam), t.Name, cur.chain.Name, maxRuleEvals, ErrBadRuleset)
		}
		i := cur.next
		cur.next++
		o, err := w.evalRule(h, t, cur.chain, i)
		if err != nil {
			return fate{}, fmt.Errorf("table %s %s chain %s rule %d: %w", nft.Keyword(w.fam), t.Name, cur.chain.Name, i, err)
		}
		if o.kind == outReturn && len(stack) > 0 {
			o.step.Target = stack[len(stack)-1].chain.Name
		}
		w.step(o.step)
		switch o.kind {
		case outContinue:
		case outAccept, outNAT:
			return fate{verdict: Accepted}, nil
		case outDrop:
			return fate{verdict: Dropped}, nil
		case outReject:
			return fate{verdict: Rejected, reject: o.reject}, nil
		case outReturn:
			if len(stack) == 0 {
				return policy()
			}
			cur = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		case outJump, outGoto:
			next, err := jumpTarget(t, o.target)
			if err != nil {
				return fate{}, fmt.Errorf("table %s %s chain %s rule %d: %w", nft.Keyword(w.fam), t.Name, cur.chain.Name, i, err)
			}
			if o.kind == outJump {
				if len(stack) >= maxJumpStack {
					return fate{}, fmt.Errorf("table %s %s chain %s rule %d: jumps nested deeper than %d: %w",
						nft.Keyword(w.fam), t.Name, cur.chain.Name, i, maxJumpStack, ErrBadRuleset)
				}
				stack = append(stack, cur)
			}
			cur = frame{chain: next}
		}
	}
}

func jumpTarget(t *nft.Table, name string) (*nft.Chain, error) {
	c, ok := t.Chains[name]
	if !ok {
		return nil, fmt.Errorf("chain %s: no such chain: %w", name, ErrBadRuleset)
	}
	if c.Hook != nil {
		return nil, fmt.Errorf("chain %s: is a base chain: %w", name, ErrBadRuleset)
	}
	return c, nil
}

// verdictOutcome turns an nft verdict into a rule outcome.
func verdictOutcome(v nft.Verdict, s Step) (outcome, error) {
	o := outcome{step: s}
	switch v.Kind {
	case nft.Accept:
		o.kind, o.step.Action = outAccept, ActAccept
	case nft.Drop:
		o.kind, o.step.Action = outDrop, ActDrop
	case nft.Return:
		o.kind, o.step.Action = outReturn, ActReturn
	case nft.Jump:
		o.kind, o.step.Action, o.target, o.step.Target = outJump, ActJump, v.Chain, v.Chain
	case nft.Goto:
		o.kind, o.step.Action, o.target, o.step.Target = outGoto, ActGoto, v.Chain, v.Chain
	default:
		return outcome{}, fmt.Errorf("verdict kind %d: %w", v.Kind, ErrBadRuleset)
	}
	return o, nil
}

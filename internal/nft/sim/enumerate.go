package sim

import (
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"slices"
)

// ErrTooManyBranches is returned by Enumerate when the random choices a packet
// meets branch into more than MaxBranches runs, or the runs take more than
// MaxEnumerateSteps steps in all.
var ErrTooManyBranches = errors.New("too many random branches")

// Bounds of one Enumerate. Every outcome carries its whole trace, so a
// cascade of N endpoint rules costs about N²/2 steps: 2,000 endpoints fit.
const (
	MaxBranches       = 1 << 16
	MaxEnumerateSteps = 1 << 21
)

// Outcome is one distinct way a packet can end, and how likely it is.
type Outcome struct {
	// Result is the first run, in enumeration order, that ended this way.
	Result Result
	// Probability is the exact probability of ending this way (outcomes with
	// the same verdict, reject kind, delivery and final packet are merged).
	Probability *big.Rat
	// Choices are the random choices of Result's run (true: the `numgen
	// random` match was taken), for RunChoices.
	Choices []bool
}

// Enumerate walks the packet once per combination of `numgen random` choices
// and returns the distinct outcomes with their probabilities, which sum to 1.
// A `numgen random mod N V` match is a two-way branch (matches with
// probability 1/N, else not), so a cascade of N endpoint rules takes N runs.
// Outcomes come in the order first met, taking the matching branch first: the
// endpoints of a cascade in rule order. The Simulator's state is read (known
// connections, live affinity elements) but not changed; ctx.Rand is ignored.
func (s *Simulator) Enumerate(ctx Context, p Packet) ([]Outcome, error) {
	type key struct {
		verdict  Verdict
		reject   RejectKind
		delivery Delivery
		final    Packet
	}
	var (
		out    []Outcome
		index  = map[key]int{}
		prefix []bool
		steps  int
	)
	for runs := 0; ; runs++ {
		if runs == MaxBranches || steps > MaxEnumerateSteps {
			return nil, fmt.Errorf("packet %s: more than %d runs or %d steps: %w", p, MaxBranches, MaxEnumerateSteps, ErrTooManyBranches)
		}
		r := &replay{prefix: prefix, prob: prob{num: 1, den: 1}}
		res, err := s.simulate(ctx, p, r, s.st.clone())
		if err != nil {
			return nil, err
		}
		steps += len(res.Trace)
		k := key{res.Verdict, res.Reject, res.Delivery, res.Final}
		if i, ok := index[k]; ok {
			out[i].Probability.Add(out[i].Probability, r.prob.rat())
		} else {
			index[k] = len(out)
			out = append(out, Outcome{Result: res, Probability: r.prob.rat(), Choices: slices.Clone(r.taken)})
		}
		last := -1
		for i := len(r.taken) - 1; i >= 0; i-- {
			if r.taken[i] {
				last = i
				break
			}
		}
		if last < 0 {
			return out, nil
		}
		prefix = append(slices.Clone(r.taken[:last]), false)
	}
}

// RunChoices is Run with the random choices of an Outcome (Outcome.Choices)
// instead of ctx.Rand: it walks the packet down that branch and keeps its
// effects on state, as Run does. Choices beyond those given take the match.
func (s *Simulator) RunChoices(ctx Context, p Packet, choices []bool) (Result, error) {
	st := s.st.clone()
	res, err := s.simulate(ctx, p, &replay{prefix: choices, prob: prob{num: 1, den: 1}}, st)
	if err != nil {
		return Result{}, err
	}
	s.st = st
	return res, nil
}

// chooser decides `numgen random mod mod` == value. why explains a miss.
type chooser interface {
	random(mod, value uint32) (match bool, why string)
}

// randChooser draws from a random source (nil: always 0).
type randChooser struct{ fn func(mod uint32) uint32 }

func (c randChooser) random(mod, value uint32) (bool, string) {
	var n uint32
	if c.fn != nil {
		n = c.fn(mod) % mod
	}
	return n == value, fmt.Sprintf("drew %d", n)
}

// replay follows the choices in prefix, then takes the matching branch,
// recording every two-way choice it makes and the probability of the path.
type replay struct {
	prefix []bool
	taken  []bool
	prob   prob
}

func (r *replay) random(mod, value uint32) (bool, string) {
	if value >= mod {
		return false, fmt.Sprintf("never: %d is not below %d", value, mod)
	}
	if mod == 1 {
		return true, ""
	}
	m := true
	if n := len(r.taken); n < len(r.prefix) {
		m = r.prefix[n]
	}
	r.taken = append(r.taken, m)
	if m {
		r.prob.mul(1, uint64(mod))
		return true, ""
	}
	r.prob.mul(uint64(mod)-1, uint64(mod))
	return false, fmt.Sprintf("drew another of %d values (p=%d/%d)", mod, mod-1, mod)
}

// prob is an exact probability: num/den while both fit in 64 bits (reduced
// after every step), else big.
type prob struct {
	num, den uint64
	big      *big.Rat
}

// mul multiplies p by n/d (d > 0).
func (p *prob) mul(n, d uint64) {
	if p.big == nil {
		a, b := p.num, d
		if g := gcd(a, b); g > 1 {
			a, b = a/g, b/g
		}
		c, e := n, p.den
		if g := gcd(c, e); g > 1 {
			c, e = c/g, e/g
		}
		hn, ln := bits.Mul64(a, c)
		hd, ld := bits.Mul64(e, b)
		if hn == 0 && hd == 0 {
			p.num, p.den = ln, ld
			return
		}
		p.big = p.rat()
	}
	p.big.Mul(p.big, new(big.Rat).SetFrac(new(big.Int).SetUint64(n), new(big.Int).SetUint64(d)))
}

func (p *prob) rat() *big.Rat {
	if p.big != nil {
		return new(big.Rat).Set(p.big)
	}
	return new(big.Rat).SetFrac(new(big.Int).SetUint64(p.num), new(big.Int).SetUint64(p.den))
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

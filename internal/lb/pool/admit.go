package pool

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/svcnet/svcnet/internal/lb/alloc"
)

// Candidate is one valid pool (Parse's output) offered to Admit.
type Candidate struct {
	Pool alloc.Pool
	// Established: this version of the pool was admitted before (kube mode: its
	// status says so for its generation, see StatusAdmitted; file mode: the
	// control plane's state records it with these addresses). An edited pool is
	// not established: its new version is admitted as a new pool would be.
	Established bool
	// Created is the pool's creationTimestamp.
	Created time.Time
}

// Admission is Admit's result.
type Admission struct {
	// Pools are the admitted pools, sorted by name. An established pool that
	// holds reserved addresses has them in Excluded.
	Pools []alloc.Pool
	// Refused holds one *Error per refused pool (wrapping ErrOverlap,
	// ErrReserved or both), sorted by pool name.
	Refused []error
	// Conflicts holds one *Error (ErrReserved) per admitted pool that holds
	// reserved addresses, which it no longer hands out; sorted by pool name.
	Conflicts []error
}

// maxProblems bounds the problems listed in one error; the rest are counted.
const maxProblems = 8

// Admit decides which pools serve, as an admission webhook would have had each
// been checked when it was applied, so that a bad pool never breaks a good one.
// The pools are taken in order: established ones first, then by Created, then by
// name (so the newer of two conflicting pools is the one refused). A pool is
// refused when it shares an address with a pool admitted before it (the error
// names both pools, the shared addresses and the other pool's range), or when it
// is not established and holds a reserved address (a node's address, a pod CIDR,
// a service CIDR; the error names which). A refused pool blocks no later pool.
//
// An established pool that holds reserved addresses (a Node was added with an
// address in it, say) is still admitted, so that no existing allocation moves,
// but those addresses are Excluded: never newly handed out (see
// alloc.Pool.Excluded), and reported in Conflicts.
//
// Admit is pure and deterministic: the order of cands and reserved does not
// matter. Pool names must be unique.
func Admit(cands []Candidate, reserved []alloc.Reserved) Admission {
	order := slices.Clone(cands)
	slices.SortStableFunc(order, func(a, b Candidate) int {
		if a.Established != b.Established {
			if a.Established {
				return -1
			}
			return 1
		}
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Pool.Name, b.Pool.Name))
	})
	reserved = slices.Clone(reserved)
	slices.SortStableFunc(reserved, func(a, b alloc.Reserved) int {
		return cmp.Or(a.Range.First.Compare(b.Range.First), a.Range.Last.Compare(b.Range.Last), cmp.Compare(a.What, b.What))
	})
	var out Admission
	var admitted []alloc.Pool
	for _, c := range order {
		p := c.Pool
		overlaps, other := overlapProblems(p, admitted)
		held, excluded := reservedProblems(p, reserved)
		switch {
		case len(overlaps) > 0 || (len(held) > 0 && !c.Established):
			out.Refused = append(out.Refused, &Error{Pool: p.Name, Other: other, Reserved: len(held) > 0,
				Problems: capped(append(overlaps, held...))})
		default:
			if len(held) > 0 {
				p.Excluded = excluded
				out.Conflicts = append(out.Conflicts, &Error{Pool: p.Name, Reserved: true,
					Problems: append(capped(held), "these addresses are not handed out; a Service that holds one keeps it")})
			}
			admitted = append(admitted, p)
		}
	}
	out.Pools = slices.Clone(admitted)
	slices.SortFunc(out.Pools, func(a, b alloc.Pool) int { return cmp.Compare(a.Name, b.Name) })
	byPool := func(a, b error) int { return cmp.Compare(a.(*Error).Pool, b.(*Error).Pool) }
	slices.SortFunc(out.Refused, byPool)
	slices.SortFunc(out.Conflicts, byPool)
	return out
}

// overlapProblems lists, per range of p, the addresses it shares with each of
// the admitted pools (in admission order), and returns the first such pool.
func overlapProblems(p alloc.Pool, admitted []alloc.Pool) (probs []string, first string) {
	for i, r := range p.Ranges {
		for _, a := range admitted {
			for _, ar := range a.Ranges {
				shared, ok := r.Intersect(ar)
				if !ok {
					continue
				}
				if first == "" {
					first = a.Name
				}
				probs = append(probs, fmt.Sprintf("spec.addresses[%d]: %s overlaps IPAddressPool %s (%s)", i, shared, a.Name, ar))
			}
		}
	}
	return probs, first
}

// reservedProblems lists, per range of p, the reserved blocks it holds, and
// returns those blocks cut to the range.
func reservedProblems(p alloc.Pool, reserved []alloc.Reserved) (probs []string, held []alloc.Reserved) {
	for i, r := range p.Ranges {
		for _, res := range reserved {
			shared, ok := r.Intersect(res.Range)
			if !ok {
				continue
			}
			held = append(held, alloc.Reserved{Range: shared, What: res.What})
			if res.Range.First == res.Range.Last {
				probs = append(probs, fmt.Sprintf("spec.addresses[%d]: holds %s", i, res.What))
			} else {
				probs = append(probs, fmt.Sprintf("spec.addresses[%d]: %s overlaps %s", i, shared, res.What))
			}
		}
	}
	return probs, held
}

// capped returns the first maxProblems problems, and a count of the rest.
func capped(probs []string) []string {
	if len(probs) <= maxProblems {
		return probs
	}
	return append(probs[:maxProblems:maxProblems], fmt.Sprintf("and %d more", len(probs)-maxProblems))
}

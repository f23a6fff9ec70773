package servicetable

import (
	"slices"
	"sync/atomic"

	"github.com/svcnet/svcnet/internal/model"
)

// Assembler keeps the result of Assemble up to date over a changing set of
// per-Service entries, so that a proxy pays for a change in proportion to
// what it touches, not to the number of Services.
//
// Contract: after any sequence of SetNode and Set calls, Table returns what
// Assemble(node, ports, errs) returns over the entries and errors of the last
// Set of every Service (in any order; within one Service, in the order given).
// Set costs O(claims of the entries it replaces and of their rivals); Table
// costs O(changed entries × log n) plus a copy of the sorted entry list (it
// sorts everything again only when more than an eighth of the entries changed).
// An Assembler is not safe for concurrent use.
type Assembler struct {
	node   NodeConfig
	svcs   map[model.ServiceKey]*asmService
	claims map[claimKey]*asmClaimants
	// sorted holds the kept entries in ID-family order as of the last Table
	// call; changed the entries whose membership may differ since then.
	sorted  []*ServicePort
	changed map[*asmEntry]struct{}
	// lost holds the entries that lose a claim, with their errors; erred the
	// Services set with errors (so Table need not visit every Service).
	lost  map[*asmEntry]struct{}
	erred map[model.ServiceKey][]*SkipError
	// seq is the Seq of the last Table returned (0: none yet).
	seq uint64
}

// tableSeq numbers the tables of every Assembler of the process, so that
// a Delta never chains two Assemblers' tables.
var tableSeq atomic.Uint64

type asmService struct {
	entries []*asmEntry
	// dups are entries given twice (left out, with an error).
	dups []*asmEntry
	errs []*SkipError
}

type asmEntry struct {
	sp     *ServicePort
	claims []claim // never reallocated: asmClaims point into it
	// kept is the entry's current status; inSorted whether it is in sorted.
	kept, inSorted bool
	// err says why the entry is left out (a lost claim, or a duplicate).
	err *SkipError
	// removed is set once the entry's Service dropped it.
	removed bool
}

// asmClaimants are the entries claiming one key, and the one that wins it
// (lowest rank, then first entry in ID-family order).
type asmClaimants struct {
	list   []asmClaim
	winner asmClaim
}

// asmClaim is one claim of an entry: c points into e.claims. (Pointers, not
// copies: the assembler holds one per claim and a winner per key, for every
// Service of the cluster.)
type asmClaim struct {
	c *claim
	e *asmEntry
}

// sameOwner reports whether x and y may hold their key together: they are the
// same entry's, or both the same Service's (a health check port).
func sameOwner(x, y asmClaim) bool {
	if x.c.service || y.c.service {
		return x.c.service && y.c.service && x.e.sp.Name.Namespace == y.e.sp.Name.Namespace && x.e.sp.Name.Name == y.e.sp.Name.Name
	}
	return x.e == y.e
}

// NewAssembler returns an empty Assembler for the node cfg describes.
func NewAssembler(cfg NodeConfig) *Assembler {
	return &Assembler{
		node:    normalizeNode(cfg),
		svcs:    map[model.ServiceKey]*asmService{},
		claims:  map[claimKey]*asmClaimants{},
		changed: map[*asmEntry]struct{}{},
		lost:    map[*asmEntry]struct{}{},
		erred:   map[model.ServiceKey][]*SkipError{},
	}
}

// SetNode changes the node the table is for. Entries depend on it: the caller
// must Set every Service again with entries built for cfg.
func (a *Assembler) SetNode(cfg NodeConfig) { a.node = normalizeNode(cfg) }

// Entries returns the entries last Set for Service k (kept or not).
func (a *Assembler) Entries(k model.ServiceKey) []*ServicePort {
	s := a.svcs[k]
	if s == nil {
		return nil
	}
	out := make([]*ServicePort, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.sp
	}
	return out
}

// Set replaces the entries and errors of Service k (none: the Service is
// gone). Entries are compared by pointer: passing an unchanged entry again
// costs its claims, nothing more.
func (a *Assembler) Set(k model.ServiceKey, ports []*ServicePort, errs ...*SkipError) {
	affected := map[claimKey]struct{}{}
	if old := a.svcs[k]; old != nil {
		for _, e := range old.entries {
			a.drop(e, affected)
		}
		for _, e := range old.dups {
			delete(a.lost, e)
		}
		delete(a.svcs, k)
	}
	s := &asmService{}
	for _, err := range errs {
		if err != nil {
			s.errs = append(s.errs, err)
		}
	}
	var fresh []*asmEntry
	for _, sp := range ports {
		if sp == nil {
			continue
		}
		e := &asmEntry{sp: sp}
		if slices.ContainsFunc(s.entries, func(o *asmEntry) bool { return o.sp.ID == sp.ID && o.sp.Family == sp.Family }) {
			// A duplicate, which BuildService never returns: the first is kept.
			e.err = conflictError(sp, "duplicate entry; "+entryOwner(sp)+" kept")
			a.lost[e] = struct{}{}
			s.dups = append(s.dups, e)
			continue
		}
		e.claims = claimsOf(sp)
		for i := range e.claims {
			c := &e.claims[i]
			cl := a.claims[c.key]
			if cl == nil {
				cl = &asmClaimants{}
				a.claims[c.key] = cl
			}
			cl.list = append(cl.list, asmClaim{c, e})
			affected[c.key] = struct{}{}
		}
		s.entries = append(s.entries, e)
		fresh = append(fresh, e)
	}
	delete(a.erred, k)
	if len(s.errs) > 0 {
		a.erred[k] = s.errs
	}
	if len(s.entries) > 0 || len(s.dups) > 0 || len(s.errs) > 0 {
		a.svcs[k] = s
	}
	// New winners, then the status of every entry that claims a key whose
	// winner may have changed.
	recheck := map[*asmEntry]struct{}{}
	for _, e := range fresh {
		recheck[e] = struct{}{}
	}
	for key := range affected {
		cl := a.claims[key]
		if cl == nil {
			continue
		}
		cl.winner = cl.list[0]
		for _, x := range cl.list[1:] {
			if beats(x, cl.winner) {
				cl.winner = x
			}
		}
		for _, x := range cl.list {
			recheck[x.e] = struct{}{}
		}
	}
	for e := range recheck {
		a.evaluate(e)
	}
}

// drop removes e's claims (noting their keys in affected) and its status.
func (a *Assembler) drop(e *asmEntry, affected map[claimKey]struct{}) {
	for _, c := range e.claims {
		cl := a.claims[c.key]
		if cl == nil {
			continue
		}
		cl.list = slices.DeleteFunc(cl.list, func(x asmClaim) bool { return x.e == e })
		if len(cl.list) == 0 {
			delete(a.claims, c.key)
		}
		affected[c.key] = struct{}{}
	}
	e.removed, e.kept = true, false
	delete(a.lost, e)
	a.changed[e] = struct{}{}
}

// beats reports whether claim x wins over y: lower rank, then the entry first
// in ID-family order (Assemble's index order).
func beats(x, y asmClaim) bool {
	if x.c.rank != y.c.rank {
		return x.c.rank < y.c.rank
	}
	return compareEntries(x.e.sp, y.e.sp) < 0
}

// evaluate sets e's status from the winners of its claims: kept when it wins
// (or shares, as owner) every claim; else lost, with the first claim it loses.
func (a *Assembler) evaluate(e *asmEntry) {
	if e.removed {
		return
	}
	kept, err := true, (*SkipError)(nil)
	for i := range e.claims {
		c := asmClaim{&e.claims[i], e}
		if w := a.claims[c.c.key].winner; !sameOwner(w, c) {
			kept = false
			err = conflictError(e.sp, c.c.kind.String()+" "+c.c.key.String()+" already claimed as "+w.c.kind.String()+" by "+entryOwner(w.e.sp))
			break
		}
	}
	e.kept, e.err = kept, err
	if kept {
		delete(a.lost, e)
	} else {
		a.lost[e] = struct{}{}
	}
	a.changed[e] = struct{}{}
}

// Table returns the assembled table. The result is immutable: later Set calls
// do not change it. Its Delta is the change since the previous Table call
// (nil for the first), costing O(changed entries × log changed entries).
func (a *Assembler) Table() *Table {
	removed, added := a.applyChanges()
	var errs []*SkipError
	for _, e := range a.erred {
		errs = append(errs, e...)
	}
	for e := range a.lost {
		errs = append(errs, e.err)
	}
	slices.SortFunc(errs, compareSkipErrors)
	var ports []*ServicePort
	if len(a.sorted) > 0 {
		ports = slices.Clone(a.sorted)
	}
	t := &Table{Node: cloneNode(a.node), Ports: ports, Errors: errs, Seq: tableSeq.Add(1)}
	if a.seq != 0 {
		t.Delta = &Delta{From: a.seq, Removed: removed, Added: added}
	}
	a.seq = t.Seq
	return t
}

// applyChanges brings sorted up to date with the entries' statuses and
// returns the entries that left it and those that joined it, each sorted
// (an entry that left and joined again, given anew to Set, is in neither).
func (a *Assembler) applyChanges() (removed, added []*ServicePort) {
	if len(a.changed) == 0 {
		return nil, nil
	}
	removed, added = a.delta()
	if len(a.changed) > len(a.sorted)/8+16 {
		a.sorted = a.sorted[:0]
		for _, s := range a.svcs {
			for _, e := range s.entries {
				e.inSorted = e.kept
				if e.kept {
					a.sorted = append(a.sorted, e.sp)
				}
			}
		}
		for e := range a.changed {
			e.inSorted = e.kept
		}
		slices.SortFunc(a.sorted, compareEntries)
		a.changed = emptied(a.changed)
		return removed, added
	}
	// Removals first: an entry replaced by a new one of the same ID and
	// family leaves before its successor takes its place.
	for e := range a.changed {
		if e.inSorted && !e.kept {
			if i, found := slices.BinarySearchFunc(a.sorted, e.sp, compareEntries); found && a.sorted[i] == e.sp {
				a.sorted = slices.Delete(a.sorted, i, i+1)
			}
			e.inSorted = false
		}
	}
	for e := range a.changed {
		if !e.inSorted && e.kept {
			i, _ := slices.BinarySearchFunc(a.sorted, e.sp, compareEntries)
			a.sorted = slices.Insert(a.sorted, i, e.sp)
			e.inSorted = true
		}
	}
	a.changed = emptied(a.changed)
	return removed, added
}

// delta returns the entries of sorted whose entry leaves it, and those that
// join it, by the changed entries' statuses (only a changed entry's status
// can differ from its membership).
func (a *Assembler) delta() (removed, added []*ServicePort) {
	left := map[*ServicePort]int{}
	for e := range a.changed {
		switch {
		case e.inSorted && !e.kept:
			left[e.sp]++
		case !e.inSorted && e.kept:
			left[e.sp]--
		}
	}
	for sp, n := range left {
		switch {
		case n > 0:
			removed = append(removed, sp)
		case n < 0:
			added = append(added, sp)
		}
	}
	slices.SortFunc(removed, compareEntries)
	slices.SortFunc(added, compareEntries)
	return removed, added
}

// emptied returns m emptied. A Go map keeps the storage of its largest size,
// so one that grew large (a full build changes every entry) is replaced, not
// cleared: the assembler lives as long as the proxy.
func emptied[K comparable, V any](m map[K]V) map[K]V {
	if len(m) > 1024 {
		return map[K]V{}
	}
	clear(m)
	return m
}

func cloneNode(n NodeConfig) NodeConfig {
	n.NodePortAddresses = slices.Clone(n.NodePortAddresses)
	n.ClusterCIDRs = slices.Clone(n.ClusterCIDRs)
	return n
}

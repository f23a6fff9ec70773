package servicetable

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/model"
)

// TestAssemblerIncremental drives one Assembler through random changes
// (Services added, rebuilt, rebuilt with the same entries, removed, given
// duplicates and errors) on a cluster full of conflicts, and after every step
// wants the table Assemble builds from scratch over the same entries, with a
// Delta that turns the previous table's entries into this one's.
func TestAssemblerIncremental(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	svcs, sls := randomCluster(r, 24)
	cfg := testNode()
	// Two versions of each Service: as generated, and with its NodePorts and
	// external addresses moved, so that rebuilding changes who wins.
	var versions [2][]*model.ServiceState
	versions[0] = snapshot(t, svcs, sls).Services()
	moved := make([]*model.Service, len(svcs))
	for i, s := range svcs {
		c := *s
		c.Ports = append([]model.ServicePort(nil), s.Ports...)
		if c.Ports[0].NodePort != 0 {
			c.Ports[0].NodePort = int32(30000 + (i*3)%5)
		}
		c.ExternalIPs = ips("172.26.236.201")
		moved[i] = &c
	}
	versions[1] = snapshot(t, moved, sls).Services()

	type set struct {
		ports []*ServicePort
		errs  []*SkipError
	}
	current := map[model.ServiceKey]set{}
	a := NewAssembler(cfg)
	var prev *Table
	conflicts, moves := 0, 0
	for step := range 400 {
		st := versions[r.IntN(2)][r.IntN(len(versions[0]))]
		k := st.Service.Key()
		var s set
		switch op := r.IntN(10); {
		case op < 2: // removed
		case op < 3: // same entries again
			s = current[k]
		default:
			ports, err := BuildService(st, cfg)
			s.ports = ports
			if err != nil {
				s.errs = append(s.errs, err)
			}
			if op == 9 && len(ports) > 0 { // a duplicate, and an error
				s.ports = append(s.ports, ports[0])
				s.errs = append(s.errs, &SkipError{Service: k, Reason: "test"})
			}
		}
		if s.ports == nil && s.errs == nil {
			delete(current, k)
		} else {
			current[k] = s
		}
		a.Set(k, s.ports, s.errs...)
		if r.IntN(3) > 0 {
			continue // several changes between two tables
		}
		var ports []*ServicePort
		var errs []*SkipError
		for _, s := range current {
			ports = append(ports, s.ports...)
			errs = append(errs, s.errs...)
		}
		want := Assemble(cfg, ports, errs)
		got := a.Table()
		for _, e := range want.Errors {
			if e.Conflict {
				conflicts++
			}
		}
		if d := cmp.Diff(want, got, cmpOpts); d != "" {
			t.Fatalf("step %d: incremental table differs (-Assemble +Assembler):\n%s", step, d)
		}
		for i, sp := range got.Ports { // the same entries, not equal copies
			if sp != want.Ports[i] {
				t.Fatalf("step %d: entry %d is a different pointer", step, i)
			}
		}
		checkDelta(t, prev, got)
		if got.Delta != nil {
			moves += len(got.Delta.Removed) + len(got.Delta.Added)
		}
		prev = got
	}
	if conflicts < 50 || moves < 100 {
		t.Fatalf("generator too tame: %d conflicts, %d entries moved", conflicts, moves)
	}
	last := a.Table()
	checkDelta(t, prev, last)
	if again := a.Table(); again.Delta == nil || again.Delta.From != last.Seq || len(again.Delta.Removed)+len(again.Delta.Added) != 0 {
		t.Fatalf("a table with no change in between: Delta %+v, want empty from %d", again.Delta, last.Seq)
	}
}

// checkDelta wants t's Delta to turn prev's entries into t's (none for the
// first table), sorted, by pointer.
func checkDelta(t *testing.T, prev, cur *Table) {
	t.Helper()
	if prev == nil {
		if cur.Delta != nil {
			t.Fatalf("first table has a Delta")
		}
		return
	}
	d := cur.Delta
	if d == nil || d.From != prev.Seq || cur.Seq <= prev.Seq {
		t.Fatalf("table %d: Delta %+v, want one from %d", cur.Seq, d, prev.Seq)
	}
	have := map[*ServicePort]bool{}
	for _, sp := range prev.Ports {
		have[sp] = true
	}
	for _, sp := range d.Removed {
		if !have[sp] {
			t.Fatalf("Delta removes %s (%s), which the previous table lacks", sp.ID, sp.Family)
		}
		delete(have, sp)
	}
	for _, sp := range d.Added {
		if have[sp] {
			t.Fatalf("Delta adds %s (%s), which the previous table kept", sp.ID, sp.Family)
		}
		have[sp] = true
	}
	if len(have) != len(cur.Ports) {
		t.Fatalf("previous table with Delta has %d entries, the table %d", len(have), len(cur.Ports))
	}
	for _, sp := range cur.Ports {
		if !have[sp] {
			t.Fatalf("table has %s (%s), which the previous table with Delta lacks", sp.ID, sp.Family)
		}
	}
	for _, l := range [][]*ServicePort{d.Removed, d.Added} {
		if !slices.IsSortedFunc(l, compareEntries) {
			t.Fatalf("Delta not sorted")
		}
	}
}

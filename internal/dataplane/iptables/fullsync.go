package iptables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
)

// DefaultBatchPorts is how many Service ports' new chains one
// iptables-nft-restore creates in a full sync (Backend.BatchPorts).
//
// iptables-nft-restore 1.8.9 keeps the chain names a restore mentions in a
// list sorted ascending that it searches from its start for every line
// (nft-cache.c, cache_chain_list_insert): a restore's cost grows with lines
// times chains. One restore of 10,000 Service ports (31,000 chains, 80,000
// rules) took 102 s here; the same chains in restores of 200 ports each
// took 1.4 s in all, and the shared chains after them 0.3 s
// (BenchmarkKernelRestoreOrder, BenchmarkKernelSync). iptables-legacy-restore rewrites the whole
// table per restore instead, so it gets one restore (BatchPorts 0).
const DefaultBatchPorts = 200

// fullPlan is what a full sync of one family writes: the chains that the
// kernel lacks (created first, in batches, unreferenced until the final
// restore), the chains that differ from the kernel's and the per-port
// chains to delete (in the final restore, atomically per table), and
// whether the canary is missing.
type fullPlan struct {
	// newPorts holds, per Service port, its chains the kernel lacks.
	newPorts [][]*Chain
	// newFixed are shared chains the kernel lacks (KUBE-MARK-MASQ on a
	// fresh node), created before the per-port chains that jump to them.
	newFixed map[string][]*Chain
	// changed are the chains the kernel has with other rules, per table;
	// the shared chains first.
	changed map[string][]*Chain
	// stale are per-port chains in the kernel that the table no longer has.
	stale  []string
	canary bool
	// drift: the kernel differed from what was last programmed.
	drift bool
}

// planFull compares the kernel's filter, nat and mangle tables (read back)
// with rs, and with last (the ruleset last programmed, nil if none) for
// drift.
func planFull(kernel map[string]*ipt.Table, rs, last *Ruleset) *fullPlan {
	p := &fullPlan{newFixed: map[string][]*Chain{}, changed: map[string][]*Chain{}}
	chainOf := func(table, name string) *ipt.Chain {
		if t := kernel[table]; t != nil {
			return t.Chains[name]
		}
		return nil
	}
	for _, table := range []string{TableFilter, TableNAT} {
		for _, c := range rs.fixedChains(table) {
			switch k := chainOf(table, c.Name); {
			case k == nil:
				// Created empty first, filled by the final restore.
				p.newFixed[table] = append(p.newFixed[table], c)
				p.changed[table] = append(p.changed[table], c)
			case !slices.Equal(k.Rules, c.Rules):
				p.changed[table] = append(p.changed[table], c)
			}
		}
	}
	want := map[string]bool{}
	for _, port := range rs.Ports {
		var fresh []*Chain
		for _, c := range port.Chains {
			want[c.Name] = true
			switch k := chainOf(TableNAT, c.Name); {
			case k == nil:
				fresh = append(fresh, c)
			case !slices.Equal(k.Rules, c.Rules):
				p.changed[TableNAT] = append(p.changed[TableNAT], c)
			}
		}
		if len(fresh) > 0 {
			p.newPorts = append(p.newPorts, fresh)
		}
	}
	if nat := kernel[TableNAT]; nat != nil {
		for _, n := range nat.ChainNames() {
			if IsServiceChain(n) && !want[n] {
				p.stale = append(p.stale, n)
			}
		}
	}
	p.canary = chainOf("mangle", ChainCanary) == nil
	if last != nil {
		p.drift = differs(kernel, last)
	}
	return p
}

// differs reports whether the kernel's chains of this plane differ from
// last's: a chain missing or with other rules, or a per-port chain last
// did not have.
func differs(kernel map[string]*ipt.Table, last *Ruleset) bool {
	for _, table := range []string{TableFilter, TableNAT} {
		want := last.Chains(table)
		for n, c := range want {
			var k *ipt.Chain
			if t := kernel[table]; t != nil {
				k = t.Chains[n]
			}
			if k == nil || !slices.Equal(k.Rules, c.Rules) {
				return true
			}
		}
		if t := kernel[table]; t != nil && table == TableNAT {
			for n := range t.Chains {
				if IsServiceChain(n) && want[n] == nil {
					return true
				}
			}
		}
	}
	return false
}

// creation is one restore of a full sync that creates chains, and the
// chains it creates per table.
type creation struct {
	input   string
	created map[string][]string
}

// batches returns the restores that create the new chains: first the new
// shared chains, empty (so that per-port chains can jump to KUBE-MARK-MASQ;
// the final restore fills them), then the new per-port chains, batch ports
// at a time (all in one when batch is 0). Nothing jumps to any of them
// until the final restore.
func (p *fullPlan) batches(batch int) []creation {
	var out []creation
	first := creation{created: map[string][]string{}}
	var b strings.Builder
	for _, table := range []string{TableFilter, TableNAT} {
		var empty []*Chain
		for _, c := range p.newFixed[table] {
			empty = append(empty, &Chain{Name: c.Name})
			first.created[table] = append(first.created[table], c.Name)
		}
		if len(empty) > 0 {
			writeTable(&b, table, empty, nil)
		}
	}
	if b.Len() > 0 {
		first.input = b.String()
		out = append(out, first)
	}
	if batch <= 0 {
		batch = len(p.newPorts)
	}
	for i := 0; i < len(p.newPorts); i += batch {
		var chains []*Chain
		var names []string
		for _, cs := range p.newPorts[i:min(i+batch, len(p.newPorts))] {
			for _, c := range cs {
				chains = append(chains, c)
				names = append(names, c.Name)
			}
		}
		var b strings.Builder
		writeTable(&b, TableNAT, chains, nil)
		out = append(out, creation{input: b.String(), created: map[string][]string{TableNAT: names}})
	}
	return out
}

// final returns the restore input that switches the kernel to the new
// ruleset atomically per table: the changed chains rewritten, the stale
// ones deleted, the canary declared; "" when there is nothing to do.
func (p *fullPlan) final() string {
	var b strings.Builder
	if len(p.changed[TableFilter]) > 0 {
		writeTable(&b, TableFilter, p.changed[TableFilter], nil)
	}
	if len(p.changed[TableNAT]) > 0 || len(p.stale) > 0 {
		writeTable(&b, TableNAT, p.changed[TableNAT], p.stale)
	}
	if p.canary {
		b.WriteString(canaryInput())
	}
	return b.String()
}

// undo returns the restore input deleting the chains that the creations
// done made, for a full sync that failed after them: nothing jumps to them
// yet, so the kernel is as it was.
func undo(done []creation) string {
	var b strings.Builder
	for _, table := range []string{TableFilter, TableNAT} {
		var names []string
		for _, c := range done {
			names = append(names, c.created[table]...)
		}
		if len(names) > 0 {
			writeTable(&b, table, nil, names)
		}
	}
	return b.String()
}

// writeTable writes one table's restore block: chains declared (flushed)
// and filled, then the deleted ones flushed and removed.
func writeTable(b *strings.Builder, table string, chains []*Chain, deleted []string) {
	writeTableEdits(b, table, chains, nil, deleted)
}

// writeTableEdits is writeTable with edits, restore lines that change
// chains in place (editLines), after the chains written whole and before
// the deletions (an edit removes the last jump to a deleted chain).
func writeTableEdits(b *strings.Builder, table string, chains []*Chain, edits, deleted []string) {
	b.WriteString("*" + table + "\n")
	for _, c := range chains {
		b.WriteString(":" + c.Name + " - [0:0]\n")
	}
	for _, name := range deleted {
		b.WriteString(":" + name + " - [0:0]\n")
	}
	for _, c := range chains {
		for _, r := range c.Rules {
			b.WriteString("-A " + c.Name + " " + r + "\n")
		}
	}
	for _, e := range edits {
		b.WriteString(e + "\n")
	}
	for _, name := range deleted {
		b.WriteString("-X " + name + "\n")
	}
	b.WriteString("COMMIT\n")
}

// readKernel reads family f's filter, nat and mangle tables back.
func (b *Backend) readKernel(ctx context.Context, f ipfamily.Family) (map[string]*ipt.Table, error) {
	out := map[string]*ipt.Table{}
	for _, table := range []string{TableFilter, TableNAT, "mangle"} {
		saved, err := b.run.Save(ctx, f, table)
		if err != nil {
			return nil, err
		}
		tables, err := ipt.ParseSave(saved)
		if err != nil {
			return nil, fmt.Errorf("read %s table: %w", table, err)
		}
		if t := tables[table]; t != nil {
			out[table] = t
		}
	}
	return out, nil
}

// fullSync brings family f's kernel state to rs from what it holds: the
// new chains first (invisible until referenced), then one restore of the
// changed and stale chains, then the missing jumps from the built-in
// chains. It returns the number of operations (0 when the kernel already
// held rs: a restarted proxy adopts its chains without rewriting them).
// When a restore fails, the chains the earlier ones created are deleted
// again, so the kernel is left as it was.
func (b *Backend) fullSync(ctx context.Context, f ipfamily.Family, rs, last *Ruleset) (ops int, drift bool, err error) {
	kernel, err := b.readKernel(ctx, f)
	if err != nil {
		return 0, false, err
	}
	p := planFull(kernel, rs, last)
	steps := p.batches(b.BatchPorts)
	if fin := p.final(); fin != "" {
		steps = append(steps, creation{input: fin})
	}
	for i, st := range steps {
		if err := b.run.Restore(ctx, f, []byte(st.input)); err != nil {
			if u := undo(steps[:i]); u != "" {
				if uerr := b.run.Restore(ctx, f, []byte(u)); uerr != nil {
					err = errors.Join(err, fmt.Errorf("delete the chains created before the failure: %w", uerr))
				}
			}
			return 0, false, err
		}
		ops += countOps(st.input)
	}
	n, err := b.ensureJumps(ctx, f, kernel)
	return ops + n, p.drift, err
}

package iptables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Name is the plane's --data-plane value.
const Name = "iptables"

// ChainCanary is the empty chain each sync keeps in the mangle table, as
// kube-proxy's KUBE-PROXY-CANARY: when it is gone, someone flushed the
// tables and a full sync restores them.
const ChainCanary = "KUBE-PROXY-CANARY"

// CanaryInterval is the least time between two reads of the canary by
// Changed (each is an iptables-save; kube-proxy reads its canary every
// minute).
const CanaryInterval = 10 * time.Second

// Backend keeps this plane's chains in the kernel equal to the service
// table, through iptables-restore --noflush. A full sync reads the kernel's
// tables back and writes only what differs from the table: the chains the
// kernel lacks first (in batches of BatchPorts Service ports, unreferenced
// until the last restore), then in one restore the chains whose rules
// differ and the deletion of the per-port chains the table no longer has;
// so a restarted proxy adopts what it finds without rewriting it, and never
// flushes built-in chains or touches others' chains. A partial sync rewrites
// the shared chains that changed and the chains of changed Service ports
// only. Each restore commits the filter table, then the nat table, each
// atomically; a failed full sync deletes the chains its earlier restores
// created.
//
// Contract: one goroutine calls Sync, Changed and Cleanup.
type Backend struct {
	run      ipt.Runner
	families []ipfamily.Family
	state    map[ipfamily.Family]*familyState
	// BatchPorts is how many Service ports' new chains one restore of a
	// full sync creates; 0 creates them all in one. New sets it to
	// DefaultBatchPorts, or to 0 when run is iptables-legacy.
	BatchPorts int
	// lastCanary is when Changed last read the canary.
	lastCanary time.Time
}

type familyState struct {
	synced bool
	last   *Ruleset
	// ports are the entries last programmed, by ID (compared by pointer).
	ports map[string]*servicetable.ServicePort
}

// New returns a backend programming the given families (both when none
// given) through run.
func New(run ipt.Runner, families ...ipfamily.Family) *Backend {
	if len(families) == 0 {
		families = ipfamily.All
	}
	b := &Backend{run: run, families: families, state: map[ipfamily.Family]*familyState{}, BatchPorts: DefaultBatchPorts}
	if e, ok := run.(*ipt.Exec); ok && e.Variant == ipt.Legacy {
		b.BatchPorts = 0
	}
	for _, f := range families {
		b.state[f] = &familyState{}
	}
	return b
}

var _ dataplane.DataPlane = (*Backend)(nil)

// Name returns "iptables".
func (b *Backend) Name() string { return Name }

// Sync programs t (see the dataplane package doc for full and partial).
func (b *Backend) Sync(ctx context.Context, t *servicetable.Table, full bool) (dataplane.Stats, error) {
	start := time.Now()
	st := dataplane.Stats{Full: full, Ops: map[ipfamily.Family]int{}}
	var errs []error
	for _, f := range b.families {
		fs := b.state[f]
		var prev *Ruleset
		if fs.synced {
			prev = fs.last
		}
		rs := RenderReusing(t, f, prev)
		var (
			n     int
			drift bool
			err   error
		)
		if full || !fs.synced || !fs.last.cfg.equal(rs.cfg) {
			st.Full = true
			var last *Ruleset
			if fs.synced {
				last = fs.last
			}
			n, drift, err = b.fullSync(ctx, f, rs, last)
		} else if input := b.partialInput(fs, rs, t); input != "" {
			n, err = countOps(input), b.run.Restore(ctx, f, []byte(input))
		}
		if err != nil {
			fs.synced = false
			errs = append(errs, fmt.Errorf("sync %s iptables: %w", f, err))
			continue
		}
		st.Ops[f] = n
		st.Drift = st.Drift || drift
		fs.synced, fs.last, fs.ports = true, rs, portsOf(t, f)
	}
	st.Duration = time.Since(start)
	return st, errors.Join(errs...)
}

// portsOf returns t's entries of family f by ID.
func portsOf(t *servicetable.Table, f ipfamily.Family) map[string]*servicetable.ServicePort {
	out := map[string]*servicetable.ServicePort{}
	for _, sp := range t.Ports {
		if sp.Family == f {
			out[sp.ID] = sp
		}
	}
	return out
}

// countOps counts the operations of restore input: chains declared or
// deleted and rules written.
func countOps(input string) int {
	n := 0
	for _, l := range strings.Split(input, "\n") {
		if strings.HasPrefix(l, ":") || strings.HasPrefix(l, "-") {
			n++
		}
	}
	return n
}

// partialInput returns the restore input for the ports whose entry changed
// since the last sync, and deletes the chains of ports gone or of their
// endpoints gone; "" when no port changed. Its cost grows with the number
// of ports only through pointer comparisons: the shared chains are
// reused from the last ruleset when no port's share of them changed.
func (b *Backend) partialInput(fs *familyState, rs *Ruleset, t *servicetable.Table) string {
	changed := map[string]bool{}
	present := map[string]bool{}
	for _, sp := range t.Ports {
		if sp.Family != rs.Family {
			continue
		}
		present[sp.ID] = true
		if fs.ports[sp.ID] != sp {
			changed[sp.ID] = true
		}
	}
	var gone []string
	for id := range fs.ports {
		if !present[id] {
			gone = append(gone, id)
		}
	}
	if len(changed) == 0 && len(gone) == 0 {
		return ""
	}
	// The per-port chains of changed or removed ports that rs lacks.
	have := map[string]bool{}
	sharedSame := len(gone) == 0
	for _, p := range rs.Ports {
		if !changed[p.ID] {
			continue
		}
		for _, c := range p.Chains {
			have[c.Name] = true
		}
		if old := fs.last.portByID(p.ID); old == nil || !sameShares(old, p) {
			sharedSame = false
		}
	}
	var stale []string
	for _, p := range fs.last.Ports {
		if changed[p.ID] || !present[p.ID] {
			for _, c := range p.Chains {
				if !have[c.Name] {
					stale = append(stale, c.Name)
				}
			}
		}
	}
	slices.Sort(stale)
	stale = slices.Compact(stale)
	if sharedSame {
		rs.reuseFixed(fs.last)
	}
	return rs.PartialSince(fs.last, changed, stale)
}

// sameShares reports whether two fragments have the same rules in every
// shared chain.
func sameShares(a, b *Port) bool {
	for i := range a.shared {
		if !slices.Equal(a.shared[i], b.shared[i]) {
			return false
		}
	}
	return true
}

// canaryInput declares the canary chain in the mangle table.
func canaryInput() string { return "*mangle\n:" + ChainCanary + " - [0:0]\nCOMMIT\n" }

// ensureJumps prepends each missing jump of Jumps to its built-in chain, in
// the tables read back before the sync (the sync's restores never touch
// built-in chains), and returns how many it added. A jump is present when a
// rule of the built-in chain jumps to its target.
func (b *Backend) ensureJumps(ctx context.Context, f ipfamily.Family, kernel map[string]*ipt.Table) (int, error) {
	var in strings.Builder
	n := 0
	for _, table := range []string{TableFilter, TableNAT} {
		k := kernel[table]
		var missing []string
		for _, j := range Jumps {
			if j.Table == table && (k == nil || !jumpsTo(k.Chains[j.From], j.To)) {
				missing = append(missing, "-I "+j.From+" "+j.Rule+"\n")
			}
		}
		if len(missing) > 0 {
			in.WriteString("*" + table + "\n" + strings.Join(missing, "") + "COMMIT\n")
			n += len(missing)
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, b.run.Restore(ctx, f, []byte(in.String()))
}

// jumpsTo reports whether a rule of c jumps to chain to.
func jumpsTo(c *ipt.Chain, to string) bool {
	if c == nil {
		return false
	}
	for _, r := range c.Rules {
		if ipt.JumpTarget(r) == to {
			return true
		}
	}
	return false
}

// Changed reports whether the canary chain is gone from any family's mangle
// table: someone flushed the tables. It reads the kernel at most every
// CanaryInterval and reports false in between, and false before the first
// successful Sync.
func (b *Backend) Changed(ctx context.Context) (bool, error) {
	if time.Since(b.lastCanary) < CanaryInterval {
		return false, nil
	}
	b.lastCanary = time.Now()
	for _, f := range b.families {
		if !b.state[f].synced {
			continue
		}
		saved, err := b.run.Save(ctx, f, "mangle")
		if err != nil {
			return false, err
		}
		if !strings.Contains(string(saved), ":"+ChainCanary+" ") {
			return true, nil
		}
	}
	return false, nil
}

// ownChains are the shared chains of the plane, per table.
var ownChains = map[string][]string{
	TableFilter: {ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall},
	TableNAT:    {ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq, ChainEgressMasq},
	"mangle":    {ChainCanary},
}

// Cleanup removes, in both families, the jumps from the built-in chains to
// this plane's chains, the chains themselves (the shared ones and every
// per-port chain) and the canary: kube-proxy's iptables chains too, which
// have the same names, as kube-proxy's own --cleanup removes them.
func (b *Backend) Cleanup(ctx context.Context) error {
	var errs []error
	for _, f := range ipfamily.All {
		var in strings.Builder
		for _, table := range []string{TableFilter, TableNAT, "mangle"} {
			saved, err := b.run.Save(ctx, f, table)
			if err != nil {
				errs = append(errs, fmt.Errorf("cleanup %s iptables: %w", f, err))
				continue
			}
			tables, err := ipt.ParseSave(saved)
			if err != nil || tables[table] == nil {
				errs = append(errs, fmt.Errorf("cleanup %s iptables: read %s: %v", f, table, err))
				continue
			}
			in.WriteString(cleanupInput(tables[table]))
		}
		if in.Len() > 0 {
			if err := b.run.Restore(ctx, f, []byte(in.String())); err != nil {
				errs = append(errs, fmt.Errorf("cleanup %s iptables: %w", f, err))
			}
		}
		b.state[f] = &familyState{}
	}
	return errors.Join(errs...)
}

// cleanupInput is the restore input removing this plane's chains from a
// table read back, "" when it has none.
func cleanupInput(t *ipt.Table) string {
	own := map[string]bool{}
	for _, n := range ownChains[t.Name] {
		if t.Chains[n] != nil {
			own[n] = true
		}
	}
	for n := range t.Chains {
		if t.Name == TableNAT && IsServiceChain(n) {
			own[n] = true
		}
	}
	if len(own) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("*" + t.Name + "\n")
	names := t.ChainNames()
	for _, n := range names {
		if !ipt.IsBuiltin(t.Name, n) {
			continue
		}
		for _, r := range t.Chains[n].Rules {
			if own[ipt.JumpTarget(r)] {
				b.WriteString("-D " + n + " " + r + "\n")
			}
		}
	}
	for _, n := range names {
		if own[n] {
			b.WriteString(":" + n + " - [0:0]\n")
		}
	}
	for _, n := range names {
		if own[n] {
			b.WriteString("-X " + n + "\n")
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

package nftables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/proxy/servicetable"
)

// Backend keeps svcnet's tables in the kernel equal to the service table.
//
// Contract: Sync is not safe for concurrent use (one sync runner calls it).
// Every Sync applies at most one transaction per family; when a transaction
// fails the kernel keeps the previous table and the next Sync is a full one.
type Backend struct {
	conn     nft.Conn
	families []nft.Family
	state    map[nft.Family]*familyState
}

type familyState struct {
	fc       familyConfig
	skeleton *nft.Table
	// clusterIPs are the ClusterIPs the skeleton's cluster-ips set was
	// rendered from, in table order.
	clusterIPs []netip.Addr
	// ports holds, by entry ID, the entry last programmed and its fragment.
	ports map[string]*programmed
	// epoch numbers partial syncs, to find removed entries without a set.
	epoch uint64
	// synced is set after a successful full sync, cleared on any failure.
	synced bool
}

// programmed is one Service port entry as last programmed. Its fragment is
// not kept: rendering is deterministic, so a partial sync renders the old
// entry again to diff against (a few microseconds per change, against tens of
// megabytes of retained rules at 10k Services).
type programmed struct {
	sp    *servicetable.ServicePort
	epoch uint64
}

// New returns a backend programming the given families (both when none given)
// through conn.
func New(conn nft.Conn, families ...nft.Family) *Backend {
	if len(families) == 0 {
		families = []nft.Family{nft.IPv4, nft.IPv6}
	}
	b := &Backend{conn: conn, families: families, state: map[nft.Family]*familyState{}}
	for _, f := range families {
		b.state[f] = &familyState{}
	}
	return b
}

// Stats describes one sync.
type Stats struct {
	Full bool
	// Ops counts transaction operations per family; 0 means nothing changed.
	Ops map[nft.Family]int
	// Drift is set when a full sync found the kernel different from what
	// svcnet last programmed (someone flushed or edited the table).
	Drift    bool
	Duration time.Duration
}

// TotalOps returns the number of operations over all families.
func (s Stats) TotalOps() int {
	n := 0
	for _, v := range s.Ops {
		n += v
	}
	return n
}

// Sync programs t. With full set, or when the previous sync failed or none
// succeeded yet, it reads each table back from the kernel and applies the whole
// difference (this is how a restarted proxy adopts what it finds, and how drift
// is repaired); otherwise it applies the difference between the last programmed
// table and t, touching only Service ports whose entry changed (entries are
// compared by pointer: the caller reuses unchanged *ServicePort values).
func (b *Backend) Sync(ctx context.Context, t *servicetable.Table, full bool) (Stats, error) {
	start := time.Now()
	st := Stats{Full: full, Ops: map[nft.Family]int{}}
	byFam := splitFamilies(t)
	var errs []error
	for _, f := range b.families {
		fs := b.state[f]
		fc := configFor(f, t.Node)
		ports := byFam[f]
		doFull := full || !fs.synced || !sameConfig(fs.fc, fc)
		var (
			n     int
			drift bool
			err   error
		)
		if doFull {
			st.Full = true
			n, drift, err = b.fullSync(ctx, fs, fc, ports)
		} else {
			n, err = b.partialSync(ctx, fs, fc, ports)
		}
		st.Ops[f] = n
		st.Drift = st.Drift || drift
		if err != nil {
			fs.synced = false
			errs = append(errs, fmt.Errorf("sync %s %s: %w", f, TableName, err))
		}
	}
	st.Duration = time.Since(start)
	return st, errors.Join(errs...)
}

func (b *Backend) fullSync(ctx context.Context, fs *familyState, fc familyConfig, ports []*servicetable.ServicePort) (int, bool, error) {
	cur, err := b.conn.Read(ctx, fc.Family, TableName)
	if err != nil && !errors.Is(err, nft.ErrNoTable) {
		return 0, false, fmt.Errorf("read: %w", err)
	}
	cips := clusterIPs(ports)
	skel := renderSkeleton(fc, cips)
	pm := make(map[string]*programmed, len(ports))
	want := skel.Clone()
	for _, sp := range ports {
		fr := renderService(fc, sp)
		pm[sp.ID] = &programmed{sp: sp}
		merge(want, fr)
	}
	tx := nft.NewTx(fc.Family, TableName)
	if cur == nil {
		tx.AddTable()
	}
	diff(tx, cur, want, func(string) bool { return true })
	if tx.Len() > 0 {
		if err := b.conn.Apply(ctx, tx); err != nil {
			return 0, false, fmt.Errorf("apply full sync of %d ops: %w", tx.Len(), err)
		}
	}
	drift := fs.synced && tx.Len() > 0
	fs.fc, fs.skeleton, fs.clusterIPs, fs.ports, fs.synced = fc, skel, cips, pm, true
	return tx.Len(), drift, nil
}

// partialSync costs O(entries) pointer comparisons plus the rendering and
// diff of the entries that changed; it allocates in proportion to the change.
// fs is updated only once the transaction is applied.
func (b *Backend) partialSync(ctx context.Context, fs *familyState, fc familyConfig, ports []*servicetable.ServicePort) (int, error) {
	epoch := fs.epoch + 1
	type change struct {
		id  string
		old *programmed               // nil: a new entry
		sp  *servicetable.ServicePort // nil: the entry is gone
	}
	var changes []change
	seen := 0
	for _, sp := range ports {
		old := fs.ports[sp.ID]
		if old != nil {
			old.epoch = epoch
			seen++
			if old.sp == sp {
				continue
			}
		}
		changes = append(changes, change{id: sp.ID, old: old, sp: sp})
	}
	if seen < len(fs.ports) {
		var gone []string
		for id, p := range fs.ports {
			if p.epoch != epoch {
				gone = append(gone, id)
			}
		}
		slices.Sort(gone)
		for _, id := range gone {
			changes = append(changes, change{id: id, old: fs.ports[id]})
		}
	}
	if len(changes) == 0 {
		fs.epoch = epoch
		return 0, nil
	}

	tx := nft.NewTx(fc.Family, TableName)
	// The skeleton depends only on the config (unchanged in a partial sync)
	// and the ClusterIPs: reuse it when they are the same.
	cips := clusterIPs(ports)
	skel := fs.skeleton
	if !slices.Equal(cips, fs.clusterIPs) {
		skel = renderSkeleton(fc, cips)
		diff(tx, fs.skeleton, skel, func(string) bool { return true })
	}
	shared := func(n string) bool { _, ok := skel.Sets[n]; return !ok }
	for i := range changes {
		c := &changes[i]
		var oldFrag, newFrag *fragment
		if c.old != nil {
			oldFrag = renderService(fs.fc, c.old.sp)
		}
		if c.sp != nil {
			newFrag = renderService(fc, c.sp)
		}
		diff(tx, oldFrag, newFrag, shared)
	}
	if tx.Len() > 0 {
		if err := b.conn.Apply(ctx, tx); err != nil {
			return 0, fmt.Errorf("apply partial sync of %d ops: %w", tx.Len(), err)
		}
	}
	for _, c := range changes {
		if c.sp == nil {
			delete(fs.ports, c.id)
		} else {
			fs.ports[c.id] = &programmed{sp: c.sp, epoch: epoch}
		}
	}
	fs.skeleton, fs.clusterIPs, fs.epoch = skel, cips, epoch
	return tx.Len(), nil
}

// Render returns the tables that t would program, without touching the
// kernel: for golden files, the tracer and `--dump`.
func Render(t *servicetable.Table, families ...nft.Family) []*nft.Table {
	if len(families) == 0 {
		families = []nft.Family{nft.IPv4, nft.IPv6}
	}
	byFam := splitFamilies(t)
	var out []*nft.Table
	for _, f := range families {
		fc := configFor(f, t.Node)
		frags := map[string]*fragment{}
		for _, sp := range byFam[f] {
			frags[sp.ID] = renderService(fc, sp)
		}
		out = append(out, assemble(renderSkeleton(fc, clusterIPs(byFam[f])), frags))
	}
	return out
}

// Cleanup deletes svcnet's tables (kube-proxy --cleanup); absent tables are fine.
func Cleanup(ctx context.Context, conn nft.Conn) error {
	var errs []error
	for _, f := range []nft.Family{nft.IPv4, nft.IPv6} {
		if _, err := conn.Read(ctx, f, TableName); errors.Is(err, nft.ErrNoTable) {
			continue
		} else if err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s %s: %w", f, TableName, err))
			continue
		}
		tx := nft.NewTx(f, TableName)
		tx.DeleteTable()
		if err := conn.Apply(ctx, tx); err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s %s: %w", f, TableName, err))
		}
	}
	return errors.Join(errs...)
}

func assemble(skel *nft.Table, frags map[string]*fragment) *nft.Table {
	t := skel.Clone()
	for _, id := range sortedIDs(frags) {
		merge(t, frags[id])
	}
	return t
}

// merge adds a fragment's chains, sets and elements to t (t's sets are
// modified in place: t must be a private copy).
func merge(t *nft.Table, fr *fragment) {
	for n, c := range fr.Chains {
		t.Chains[n] = c
	}
	for n, s := range fr.Sets {
		dst, ok := t.Sets[n]
		if !ok {
			cp := *s
			cp.Elements = make(map[string]nft.Element, len(s.Elements))
			dst = &cp
			t.Sets[n] = dst
		}
		for k, e := range s.Elements {
			dst.Elements[k] = e
		}
	}
}

func splitFamilies(t *servicetable.Table) map[nft.Family][]*servicetable.ServicePort {
	out := map[nft.Family][]*servicetable.ServicePort{}
	for _, sp := range t.Ports {
		f := nft.IPv4
		if sp.Family == servicetable.IPv6 {
			f = nft.IPv6
		}
		out[f] = append(out[f], sp)
	}
	return out
}

func configFor(f nft.Family, n servicetable.NodeConfig) familyConfig {
	fc := familyConfig{Family: f, MasqueradeAll: n.MasqueradeAll}
	is6 := f == nft.IPv6
	for _, p := range n.ClusterCIDRs {
		if p.Addr().Is6() == is6 && !fc.ClusterCIDR.IsValid() {
			fc.ClusterCIDR = p.Masked()
		}
	}
	for _, a := range n.NodePortAddresses {
		if a.Is6() == is6 && !a.IsLoopback() {
			fc.NodePortAddrs = append(fc.NodePortAddrs, a)
		}
	}
	slices.SortFunc(fc.NodePortAddrs, netip.Addr.Compare)
	return fc
}

func sameConfig(a, b familyConfig) bool {
	return a.Family == b.Family && a.ClusterCIDR == b.ClusterCIDR && a.MasqueradeAll == b.MasqueradeAll &&
		slices.Equal(a.NodePortAddrs, b.NodePortAddrs)
}

func clusterIPs(ports []*servicetable.ServicePort) []netip.Addr {
	var out []netip.Addr
	for _, sp := range ports {
		if sp.ClusterIP.IsValid() {
			out = append(out, sp.ClusterIP)
		}
	}
	return out
}

func sortedIDs[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

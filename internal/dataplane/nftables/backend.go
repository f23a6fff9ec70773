package nftables

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Backend keeps svcnet's tables in the kernel equal to the service table.
//
// Contract: Sync is not safe for concurrent use (one sync runner calls it).
// Every Sync applies at most one transaction per family; when a transaction
// fails the kernel keeps the previous table and the next Sync is a full one.
type Backend struct {
	conn     nft.Conn
	families []ipfamily.Family
	state    map[ipfamily.Family]*familyState
	// shards, when set, fixes the shard count (the benchmark's unsharded
	// reference); 0 follows the number of Service ports.
	shards int
	// gen is the ruleset generation after the last Sync (haveGen: read).
	gen     uint32
	haveGen bool
}

// Name is the plane's --data-plane value.
const Name = "nftables"

var _ dataplane.DataPlane = (*Backend)(nil)

type familyState struct {
	fc     familyConfig
	shards int
	// cipRefs counts the programmed Service ports of each ClusterIP: the
	// main table's cluster-ips set holds exactly its keys.
	cipRefs map[netip.Addr]int
	// ports holds, by entry ID, the entry last programmed; live holds the
	// same entries by pointer. Entries are immutable, so a partial sync
	// finds an unchanged one by its pointer alone (a hash of 8 bytes, with
	// no read of the entry: at 10k Service ports, a sixth of the cost of
	// looking each one up by ID). Their rules are not kept: rendering is
	// deterministic, so a partial sync renders the old entry again to diff
	// against (a few microseconds per change, against tens of megabytes of
	// retained rules at 10k Services).
	ports map[string]*servicetable.ServicePort
	live  map[*servicetable.ServicePort]struct{}
	// synced is set after a successful full sync, cleared on any failure.
	synced bool
	// seq is the Seq of the table last programmed.
	seq uint64
}

// New returns a backend programming the given families (both when none given)
// through conn.
func New(conn nft.Conn, families ...ipfamily.Family) *Backend {
	if len(families) == 0 {
		families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	}
	b := &Backend{conn: conn, families: families, state: map[ipfamily.Family]*familyState{}}
	for _, f := range families {
		b.state[f] = &familyState{}
	}
	return b
}

// Sync programs t. With full set, or when the previous sync failed or none
// succeeded yet, it reads each table back from the kernel and applies the whole
// difference (this is how a restarted proxy adopts what it finds, and how drift
// is repaired); otherwise it applies the difference between the last programmed
// table and t, touching only Service ports whose entry changed (entries are
// compared by pointer: the caller reuses unchanged *ServicePort values). When
// t's Delta follows the table last programmed, the changed entries come from
// it and a partial sync costs nothing per unchanged entry.
func (b *Backend) Sync(ctx context.Context, t *servicetable.Table, full bool) (dataplane.Stats, error) {
	start := time.Now()
	st := dataplane.Stats{Full: full, Ops: map[ipfamily.Family]int{}}
	var byFam map[ipfamily.Family][]*servicetable.ServicePort
	portsOf := func(f ipfamily.Family) []*servicetable.ServicePort {
		if byFam == nil {
			byFam = splitFamilies(t)
		}
		return byFam[f]
	}
	var errs []error
	for _, f := range b.families {
		fs := b.state[f]
		fc := configFor(f, t.Node)
		doFull := full || !fs.synced || !sameConfig(fs.fc, fc)
		var changes []change
		if !doFull {
			var count int
			var ok bool
			if changes, count, ok = fs.deltaChanges(t, f); !ok {
				changes, count = fs.walkChanges(portsOf(f))
			}
			doFull = !b.keep(fs.shards, count)
		}
		var (
			n     int
			drift bool
			err   error
		)
		if doFull {
			st.Full = true
			n, drift, err = b.fullSync(ctx, fs, fc, portsOf(f))
		} else {
			n, err = b.partialSync(ctx, fs, fc, changes)
		}
		st.Ops[f] = n
		st.Drift = st.Drift || drift
		if err != nil {
			fs.synced = false
			errs = append(errs, fmt.Errorf("sync %s %s: %w", f, TableName, err))
		} else {
			fs.seq = t.Seq
		}
	}
	if g, err := b.conn.Generation(ctx); err == nil {
		b.gen, b.haveGen = g, true
	}
	st.Duration = time.Since(start)
	return st, errors.Join(errs...)
}

// Probe commits and deletes a scratch table per family holding every
// expression kind svcnet uses (nft.Probe over nft.Examples, under a
// millisecond): a kernel that lacks one fails here, naming the module.
func (b *Backend) Probe(ctx context.Context) error {
	err := nft.Probe(ctx, b.conn, b.families, nft.Examples())
	if errors.Is(err, nft.ErrNotSupported) {
		return dataplane.NotSupported(err)
	}
	return err
}

// Name returns "nftables".
func (b *Backend) Name() string { return Name }

// Changed reports whether the ruleset generation moved since the last Sync:
// someone (maybe harmlessly: any commit in the namespace bumps it) changed
// nftables. Before the first Sync it reports false.
func (b *Backend) Changed(ctx context.Context) (bool, error) {
	g, err := b.conn.Generation(ctx)
	if err != nil {
		return false, fmt.Errorf("read nftables generation: %w", err)
	}
	return b.haveGen && g != b.gen, nil
}

// Cleanup deletes every svcnet table of both families (Cleanup).
func (b *Backend) Cleanup(ctx context.Context) error { return Cleanup(ctx, b.conn) }

// fullSync reads every svcnet table of the family back from the kernel and
// applies, in one transaction, what makes them equal to ports: it creates
// missing tables, deletes shards no longer in the layout and repairs drift.
// A restarted proxy keeps the shard count it finds when it still suits, so
// adoption changes nothing.
func (b *Backend) fullSync(ctx context.Context, fs *familyState, fc familyConfig, ports []*servicetable.ServicePort) (int, bool, error) {
	cur, err := b.readTables(ctx, fc.Family)
	if err != nil {
		return 0, false, err
	}
	k := fs.shards
	if !fs.synced {
		k = 0
		for n := range cur {
			if n != TableName {
				k++
			}
		}
	}
	if !b.keep(k, len(ports)) {
		k = b.count(len(ports))
	}
	cips := clusterIPs(ports)
	want := newLayout(fc, k, cips)
	pm := make(map[string]*servicetable.ServicePort, len(ports))
	live := make(map[*servicetable.ServicePort]struct{}, len(ports))
	for _, sp := range ports {
		pm[sp.ID] = sp
		live[sp] = struct{}{}
		want.add(sp, renderService(fc, sp))
	}
	bt := newBatch(fc.Family)
	names := slices.Sorted(maps.Keys(cur))
	for n := range want.tables {
		if _, ok := cur[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	all := func(string) bool { return true }
	for _, n := range names {
		c, w := cur[n], want.tables[n]
		tx := bt.tx(n)
		switch {
		case w == nil:
			tx.DeleteTable()
			continue
		case c == nil:
			tx.AddTable()
		}
		diff(tx, c, w, all)
	}
	if bt.Len() > 0 {
		if err := b.conn.Apply(ctx, bt.list()...); err != nil {
			return 0, false, fmt.Errorf("apply full sync of %d ops: %w", bt.Len(), err)
		}
	}
	drift := fs.synced && fs.shards == k && bt.Len() > 0
	refs := make(map[netip.Addr]int, len(cips))
	for _, a := range cips {
		refs[a]++
	}
	fs.fc, fs.shards, fs.cipRefs, fs.ports, fs.live, fs.synced = fc, k, refs, pm, live, true
	return bt.Len(), drift, nil
}

// keep reports whether k shards suit n ports.
func (b *Backend) keep(k, n int) bool { return k == b.count(n) || (b.shards == 0 && keepShards(k, n)) }

// count returns the shard count a new layout for n ports gets.
func (b *Backend) count(n int) int {
	if b.shards > 0 {
		return b.shards
	}
	return shardsFor(n)
}

// readTables reads every table of the family that IsTable calls svcnet's.
func (b *Backend) readTables(ctx context.Context, f ipfamily.Family) (map[string]*nft.Table, error) {
	tables, err := nft.ReadTables(ctx, b.conn, f, IsTable)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*nft.Table, len(tables))
	for _, t := range tables {
		out[t.Name] = t
	}
	return out, nil
}

// partialSync applies changes (sorted by ID): it renders and diffs the
// entries that changed, allocating in proportion to the change. fs is
// updated only once the transaction is applied.
func (b *Backend) partialSync(ctx context.Context, fs *familyState, fc familyConfig, changes []change) (int, error) {
	if len(changes) == 0 {
		return 0, nil
	}

	bt := newBatch(fc.Family)
	// The skeletons depend only on the config (unchanged in a partial sync)
	// and, the main one, on the ClusterIPs: count them.
	refs := cipDelta{}
	for i := range changes {
		c := &changes[i]
		shard := ShardTable(shardOf(c.id, fs.shards))
		var oldMain, oldShard, newMain, newShard *nft.Table
		if c.old != nil {
			oldMain, oldShard = split(renderService(fs.fc, c.old), shard)
		}
		if c.sp != nil {
			newMain, newShard = split(renderService(fc, c.sp), shard)
		}
		diff(bt.tx(TableName), oldMain, newMain, fragmentOwns)
		diff(bt.tx(shard), oldShard, newShard, fragmentOwns)
		if c.old != nil {
			refs.add(fs.cipRefs, c.old.ClusterIP, -1)
		}
		if c.sp != nil {
			refs.add(fs.cipRefs, c.sp.ClusterIP, +1)
		}
	}
	refs.ops(bt.tx(TableName), fs.cipRefs)
	bt.deletesFirst()
	if bt.Len() > 0 {
		if err := b.conn.Apply(ctx, bt.list()...); err != nil {
			return 0, fmt.Errorf("apply partial sync of %d ops: %w", bt.Len(), err)
		}
	}
	for _, c := range changes {
		if c.old != nil {
			delete(fs.live, c.old)
		}
		if c.sp == nil {
			delete(fs.ports, c.id)
		} else {
			fs.ports[c.id] = c.sp
			fs.live[c.sp] = struct{}{}
		}
	}
	refs.commit(fs.cipRefs)
	return bt.Len(), nil
}

// Render returns the tables that t would program (per family: the main
// table, then the shards), without touching the kernel: for golden files, the
// tracer and `--dump`. The shard count is the one a fresh proxy would pick.
func Render(t *servicetable.Table, families ...ipfamily.Family) []*nft.Table {
	if len(families) == 0 {
		families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	}
	byFam := splitFamilies(t)
	var out []*nft.Table
	for _, f := range families {
		out = append(out, renderFamily(configFor(f, t.Node), byFam[f], shardsFor(len(byFam[f])))...)
	}
	return out
}

// renderFamily returns one family's tables with k shards.
func renderFamily(fc familyConfig, ports []*servicetable.ServicePort, k int) []*nft.Table {
	l := newLayout(fc, k, clusterIPs(ports))
	for _, sp := range ports {
		l.add(sp, renderService(fc, sp))
	}
	return l.sorted()
}

// Cleanup deletes svcnet's tables, the main one and every shard (kube-proxy
// --cleanup), in one transaction per family; absent tables are fine.
func Cleanup(ctx context.Context, conn nft.Conn) error {
	var errs []error
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		names, err := conn.Tables(ctx, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s: list tables: %w", f, err))
			continue
		}
		var txs []*nft.Tx
		for _, n := range names {
			if IsTable(n) {
				tx := nft.NewTx(f, n)
				tx.DeleteTable()
				txs = append(txs, tx)
			}
		}
		if err := conn.Apply(ctx, txs...); err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s svcnet tables: %w", f, err))
		}
	}
	return errors.Join(errs...)
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

// splitFamilies returns the ports of each family, in table order. It sizes
// each slice first: at 10k ports, growing them by append cost as much as the
// rest of a partial sync's bookkeeping.
func splitFamilies(t *servicetable.Table) map[ipfamily.Family][]*servicetable.ServicePort {
	n6 := 0
	for _, sp := range t.Ports {
		if sp.Family == ipfamily.IPv6 {
			n6++
		}
	}
	out := map[ipfamily.Family][]*servicetable.ServicePort{
		ipfamily.IPv4: make([]*servicetable.ServicePort, 0, len(t.Ports)-n6),
		ipfamily.IPv6: make([]*servicetable.ServicePort, 0, n6),
	}
	for _, sp := range t.Ports {
		f := familyOf(sp)
		out[f] = append(out[f], sp)
	}
	return out
}

// familyOf returns the family whose tables program sp: IPv6, or IPv4 for
// any other.
func familyOf(sp *servicetable.ServicePort) ipfamily.Family {
	if sp.Family == ipfamily.IPv6 {
		return ipfamily.IPv6
	}
	return ipfamily.IPv4
}

func configFor(f ipfamily.Family, n servicetable.NodeConfig) familyConfig {
	return familyConfig{Family: f, MasqueradeAll: n.MasqueradeAll, Mark: n.Mark(), Egress: n.Egress.For(f),
		Local: localDetector(n.LocalTraffic(f)), NodePortAddrs: n.NodePortAddrs(f)}
}

func sameConfig(a, b familyConfig) bool {
	return a.Family == b.Family && a.Local == b.Local && a.MasqueradeAll == b.MasqueradeAll && a.Mark == b.Mark &&
		slices.Equal(a.NodePortAddrs, b.NodePortAddrs) && a.Egress.Equal(b.Egress)
}

// cipDelta is the change of ClusterIP reference counts in one partial sync:
// the new count of each address touched.
type cipDelta map[netip.Addr]int

// add changes a's count by d (relative to cur, the programmed counts).
func (d cipDelta) add(cur map[netip.Addr]int, a netip.Addr, n int) {
	if !a.IsValid() {
		return
	}
	v, ok := d[a]
	if !ok {
		v = cur[a]
	}
	d[a] = v + n
}

// ops appends to tx the cluster-ips elements that appear (count 0 -> >0)
// or disappear (>0 -> 0), given the programmed counts cur.
func (d cipDelta) ops(tx *nft.Tx, cur map[netip.Addr]int) {
	var del, add []netip.Addr
	for a, n := range d {
		switch was := cur[a]; {
		case was > 0 && n <= 0:
			del = append(del, a)
		case was <= 0 && n > 0:
			add = append(add, a)
		}
	}
	elems := func(as []netip.Addr) []nft.Element {
		slices.SortFunc(as, netip.Addr.Compare)
		out := make([]nft.Element, len(as))
		for i, a := range as {
			out[i] = nft.Element{Key: []nft.Value{nft.A(a)}}
		}
		return out
	}
	tx.DeleteElements(setClusterIPs, elems(del)...)
	tx.AddElements(setClusterIPs, elems(add)...)
}

// commit writes the new counts into cur.
func (d cipDelta) commit(cur map[netip.Addr]int) {
	for a, n := range d {
		if n > 0 {
			cur[a] = n
		} else {
			delete(cur, a)
		}
	}
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

// Rules is the nftables plane as the tracer sees it (dataplane.Explainer):
// the tables Sync programs, rendered for Families (both when empty), and
// which tables of a read-back are svcnet proxy's. It needs no kernel handle.
type Rules struct{ Families []ipfamily.Family }

var _ dataplane.Explainer = Rules{}

// Render returns Render(t, r.Families...).
func (r Rules) Render(t *servicetable.Table) ([]*nft.Table, error) {
	return Render(t, r.Families...), nil
}

// Owns reports whether a table of this name is svcnet proxy's (IsTable).
func (Rules) Owns(table string) bool { return IsTable(table) }

// Explainer returns the backend's Rules.
func (b *Backend) Explainer() dataplane.Explainer { return Rules{Families: b.families} }

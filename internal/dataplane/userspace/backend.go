package userspace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Name is the plane's --data-plane value.
const Name = "userspace"

// Backend is the userspace data plane: the Proxy's ports, and the redirect
// table (TableName, per family) that sends each Service port's traffic to
// them.
//
// Contract: Sync, Changed and Cleanup are called from one goroutine at a
// time. Every Sync commits at most one transaction (both families' tables
// together); when it fails the kernel keeps its table, the proxy ports are
// put back as they were where they can be, and the next Sync is full.
type Backend struct {
	conn     nft.Conn
	proxy    *Proxy
	families []ipfamily.Family
	cfg      Config

	// applied are the entries of the last successful Sync (the proxy's
	// ports serve them).
	applied []*servicetable.ServicePort
	// programmed is, per family, the rendering of the table last
	// committed (or found equal in the kernel).
	programmed map[ipfamily.Family]string
	// synced is set after a successful Sync, cleared on any failure.
	synced bool
	// skipped holds the IDs of SCTP entries already reported.
	skipped map[string]bool
	gen     uint32
	haveGen bool
}

var (
	_ dataplane.DataPlane = (*Backend)(nil)
	_ dataplane.Explainer = Rules{}
)

// NewBackend returns a backend programming the given families (both when none
// given) through conn, with a proxy of cfg. cfg.Listen defaults to every
// address of the node (0.0.0.0 and ::), so that a redirect to any
// interface's address, and the DNAT of the node's own traffic to a node
// address, reach the proxy port; a proxy port of one family never takes
// the other's traffic (cfg.ListenTCP and ListenUDP default to tcp4/tcp6,
// udp4/udp6). Close releases the proxy.
func NewBackend(conn nft.Conn, cfg Config, families ...ipfamily.Family) *Backend {
	if len(families) == 0 {
		families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	}
	if cfg.Listen == nil {
		cfg.Listen = map[ipfamily.Family]netip.Addr{ipfamily.IPv4: netip.IPv4Unspecified(), ipfamily.IPv6: netip.IPv6Unspecified()}
	}
	if cfg.ListenTCP == nil {
		cfg.ListenTCP = func(network, address string) (net.Listener, error) {
			return net.Listen(network+familySuffix(address), address)
		}
	}
	if cfg.ListenUDP == nil {
		cfg.ListenUDP = func(network, address string) (net.PacketConn, error) {
			return net.ListenPacket(network+familySuffix(address), address)
		}
	}
	return &Backend{conn: conn, proxy: New(cfg), families: families, cfg: cfg, programmed: map[ipfamily.Family]string{}, skipped: map[string]bool{}}
}

// familySuffix is "6" for an IPv6 host:port, else "4".
func familySuffix(address string) string {
	if ap, err := netip.ParseAddrPort(address); err == nil && ap.Addr().Is6() {
		return "6"
	}
	return "4"
}

// Name returns "userspace".
func (b *Backend) Name() string { return Name }

// Proxy returns the backend's proxy (its ports and Stats).
func (b *Backend) Proxy() *Proxy { return b.proxy }

// Close closes every proxy port and connection; the redirect table stays
// (Cleanup removes it).
func (b *Backend) Close() error { return b.proxy.Close() }

// Probe commits and deletes a scratch table per family holding the
// expressions the redirect table uses (nat: dnat and redirect; reject, fib,
// lookup, ct state), so that a kernel without nft_redir, nft_nat or
// nft_reject fails here, naming the module.
func (b *Backend) Probe(ctx context.Context) error {
	err := nft.Probe(ctx, b.conn, b.families, nft.ExamplesFor(probeTable()))
	if errors.Is(err, nft.ErrNotSupported) {
		return dataplane.NotSupported(err)
	}
	return err
}

// probeTable holds one rule with every expression kind the redirect table
// may use (ExamplesFor picks the checklist entries that show them).
func probeTable() *nft.Table {
	t := nft.NewTable(ipfamily.IPv4, TableName)
	t.Chains["all"] = &nft.Chain{Name: "all", Rules: []*nft.Rule{nft.R(
		nft.Daddr(netip.MustParsePrefix("10.0.0.0/8")), nft.Saddr(netip.MustParsePrefix("10.0.0.0/8")), nft.IifnameMatch{Name: "x"},
		nft.ProtoMatch{}, nft.PortMatch{}, nft.CtStateMatch{}, nft.FibLocal{}, nft.Lookup{},
		nft.Verdict{}, nft.DNAT{}, nft.Redirect{}, nft.Reject{},
	)}}
	return t
}

// Changed reports whether the ruleset generation moved since the last Sync:
// someone (maybe harmlessly: any commit in the namespace bumps it) changed
// nftables, and the proxier answers with a full Sync, which reads the
// table back. Before the first Sync it reports false.
func (b *Backend) Changed(ctx context.Context) (bool, error) {
	g, err := b.conn.Generation(ctx)
	if err != nil {
		return false, fmt.Errorf("read nftables generation: %w", err)
	}
	return b.haveGen && g != b.gen, nil
}

// Sync makes the proxy ports those of t's served entries and the redirect
// table send their traffic there, in three steps so that a failure leaves
// things as they were where it can:
//
//  1. the proxy opens the ports of new entries and takes the new endpoints,
//     keeping the ports of removed entries (the kernel still sends traffic
//     there);
//  2. one transaction replaces each family's table whose rendering differs
//     from the last one programmed (full: from what the kernel holds, read
//     back; this is how a restarted proxy adopts the table, replacing it
//     whole, its proxy ports being new);
//  3. the ports of removed entries close.
//
// When step 2 fails the proxy goes back to the previous entries: new
// ports close and the previous endpoints are restored; a port closed in
// step 1 (an entry that stopped using an endpoint set) comes back on
// another port, which the next, full, Sync programs. An entry whose socket
// cannot be opened is left out, named in the error, and the others are
// programmed.
func (b *Backend) Sync(ctx context.Context, t *servicetable.Table, full bool) (dataplane.Stats, error) {
	start := time.Now()
	st := dataplane.Stats{Full: full || !b.synced, Ops: map[ipfamily.Family]int{}}
	entries := b.served(t)
	var errs []error
	if err := b.proxy.Update(withRemoved(entries, b.applied)); err != nil {
		errs = append(errs, err)
	}
	txs, texts, drift, err := b.transaction(ctx, t, st.Full)
	if err == nil && len(txs) > 0 {
		if err = b.conn.Apply(ctx, txs...); err != nil {
			err = fmt.Errorf("apply %s: %w", TableName, err)
		}
	}
	if g, gerr := b.conn.Generation(ctx); gerr == nil {
		b.gen, b.haveGen = g, true
	}
	st.Duration = time.Since(start)
	if err != nil {
		b.synced = false
		if rerr := b.proxy.Update(b.applied); rerr != nil {
			errs = append(errs, fmt.Errorf("restore proxy ports: %w", rerr))
		}
		return st, errors.Join(append(errs, fmt.Errorf("sync %s: %w", TableName, err))...)
	}
	for _, tx := range txs {
		st.Ops[tx.Family] = tx.Len()
	}
	for f, s := range texts {
		b.programmed[f] = s
	}
	st.Drift = drift
	if err := b.proxy.Update(entries); err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	b.applied = entries
	b.synced = len(errs) == 0
	return st, errors.Join(errs...)
}

// served returns t's entries of the backend's families that the plane
// serves. An SCTP entry is left out and logged once (Served says why).
func (b *Backend) served(t *servicetable.Table) []*servicetable.ServicePort {
	out := make([]*servicetable.ServicePort, 0, len(t.Ports))
	for _, sp := range t.Ports {
		if !slices.Contains(b.families, sp.Family) {
			continue
		}
		if !Served(sp) {
			if !b.skipped[sp.ID] {
				b.skipped[sp.ID] = true
				b.cfg.Log.Info("Service port not served: the userspace proxy speaks TCP and UDP only", "servicePort", sp.ID, "protocol", sp.Protocol)
			}
			continue
		}
		out = append(out, sp)
	}
	return out
}

// withRemoved returns entries followed by the entries of old whose (ID,
// family) entries lacks.
func withRemoved(entries, old []*servicetable.ServicePort) []*servicetable.ServicePort {
	type key struct {
		id  string
		fam ipfamily.Family
	}
	have := make(map[key]bool, len(entries))
	for _, sp := range entries {
		have[key{sp.ID, sp.Family}] = true
	}
	out := slices.Clone(entries)
	for _, sp := range old {
		if !have[key{sp.ID, sp.Family}] {
			out = append(out, sp)
		}
	}
	return out
}

// transaction returns the transactions that make each family's table that
// of t with the proxy's current ports, and the renderings they program. full compares with the kernel's table (read back) rather than
// with the last rendering programmed; drift reports that the kernel held
// something other than what the last successful Sync programmed.
func (b *Backend) transaction(ctx context.Context, t *servicetable.Table, full bool) ([]*nft.Tx, map[ipfamily.Family]string, bool, error) {
	var txs []*nft.Tx
	texts := map[ipfamily.Family]string{}
	drift := false
	for _, f := range b.families {
		want := renderFamily(configFor(f, t.Node), t.Ports, b.ports)
		text := want.Render()
		cur, exists := b.programmed[f], b.synced
		if full {
			tb, err := b.conn.Read(ctx, f, TableName)
			switch {
			case errors.Is(err, nft.ErrNoTable):
				cur, exists = "", false
			case err != nil:
				return nil, nil, false, fmt.Errorf("read %s %s: %w", nft.Keyword(f), TableName, err)
			default:
				cur, exists = tb.Render(), true
			}
			if b.synced && cur != b.programmed[f] {
				drift = true
			}
		}
		texts[f] = text
		if exists && cur == text {
			continue
		}
		txs = append(txs, replaceTx(want))
	}
	return txs, texts, drift, nil
}

// ports is the PortFunc of the proxy's open ports.
func (b *Backend) ports(k Key) (uint16, bool) {
	a, ok := b.proxy.Addr(k)
	return a.Port(), ok && a.Port() != 0
}

// replaceTx returns the transaction that replaces table t whole: created
// if missing, deleted, and built again, in one atomic step. Conntrack keeps
// the translations of established flows; they end with the proxy ports
// they were redirected to.
func replaceTx(t *nft.Table) *nft.Tx {
	tx := nft.NewTx(t.Family, t.Name)
	tx.AddTable()
	tx.DeleteTable()
	tx.AddTable()
	for _, n := range t.SetNames() {
		tx.AddSet(t.Sets[n])
		els := make([]nft.Element, 0, len(t.Sets[n].Elements))
		for _, k := range slices.Sorted(maps.Keys(t.Sets[n].Elements)) {
			els = append(els, t.Sets[n].Elements[k])
		}
		tx.AddElements(n, els...)
	}
	for _, n := range t.ChainNames() {
		tx.AddChain(t.Chains[n])
	}
	for _, n := range t.ChainNames() {
		for _, r := range t.Chains[n].Rules {
			tx.AddRule(n, r)
		}
	}
	return tx
}

// Cleanup deletes the redirect table of both families and closes every
// proxy port (svcnet proxy --cleanup). An absent table is fine.
func (b *Backend) Cleanup(ctx context.Context) error {
	var errs []error
	if err := b.proxy.Update(nil); err != nil {
		errs = append(errs, fmt.Errorf("close proxy ports: %w", err))
	}
	b.applied, b.synced = nil, false
	clear(b.programmed)
	if err := Cleanup(ctx, b.conn); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Cleanup deletes the redirect table of both families through conn, in
// one transaction; an absent table is fine.
func Cleanup(ctx context.Context, conn nft.Conn) error {
	var txs []*nft.Tx
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		names, err := conn.Tables(ctx, f)
		if err != nil {
			return fmt.Errorf("cleanup %s: list tables: %w", f, err)
		}
		if slices.Contains(names, TableName) {
			tx := nft.NewTx(f, TableName)
			tx.DeleteTable()
			txs = append(txs, tx)
		}
	}
	if err := conn.Apply(ctx, txs...); err != nil {
		return fmt.Errorf("cleanup %s: %w", TableName, err)
	}
	return nil
}

// Rules is the userspace plane as the tracer sees it (dataplane.Explainer):
// the redirect tables for Families (both when empty), with the proxy ports
// Ports names.
type Rules struct {
	Families []ipfamily.Family
	Ports    PortFunc
}

// Render returns the tables Sync programs for t with r.Ports' proxy ports.
func (r Rules) Render(t *servicetable.Table) ([]*nft.Table, error) {
	return Render(t, r.Ports, r.Families...), nil
}

// Owns reports whether a table of this name is the userspace plane's.
func (Rules) Owns(table string) bool { return table == TableName }

// Explainer returns the backend's Rules, with its proxy's current ports.
func (b *Backend) Explainer() dataplane.Explainer { return Rules{Families: b.families, Ports: b.ports} }

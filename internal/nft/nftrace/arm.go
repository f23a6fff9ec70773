package nftrace

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
)

// Match selects the packets Arm marks. Zero fields match anything.
type Match struct {
	Family ipfamily.Family
	// Proto is the layer-4 protocol (meta l4proto); 0 is any.
	Proto uint8
	// Src and Dst match the addresses (ip[6] saddr/daddr); the zero
	// Prefix is any. Their family must be Family's.
	Src, Dst netip.Prefix
	// Sport and Dport match the transport header's ports (th sport/dport,
	// whatever the protocol, as nft's "th"); 0 is any.
	Sport, Dport uint16
}

// Armed chains, both at priority raw (-300): before conntrack (-200) and
// before any NAT chain, so the mark is set before svcnet's chains see the
// packet and the matches see the packet as it was sent.
const (
	ChainPrerouting = "prerouting"
	ChainOutput     = "output"
	armPriority     = -300
)

// Armed is the set of tables Arm created. Close deletes them.
type Armed struct {
	mu       sync.Mutex
	conn     *netlink.Conn // into the armed namespace, closed by Close
	table    string
	families []ipfamily.Family
	closed   bool
}

// Arm creates, in ns, the table TABLE of each family the matches use (ip
// and/or ip6), each with the base chains prerouting (filter hook prerouting
// priority -300) and output (filter hook output priority -300), both policy
// accept, each holding one rule per match of the table's family:
//
//	ip saddr S ip daddr D meta l4proto P th sport X th dport Y meta nftrace set 1
//
// (parts that match anything left out). Everything is created in one atomic
// nf_tables transaction through internal/nft/netlink; a table of that name
// that already exists in one of those families fails it (an error wrapping
// EEXIST), and then nothing at all is created (Arm never adopts a table it
// did not make). Arm marks packets only: it never changes a verdict.
func Arm(ns *netns.NS, table string, matches []Match) (*Armed, error) {
	if table == "" || len(table) >= unix.NFT_TABLE_MAXNAMELEN {
		return nil, fmt.Errorf("arm nftrace table %q: invalid name", table)
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("arm nftrace table %q: no match given", table)
	}
	byFam := map[ipfamily.Family][]*nft.Rule{}
	var fams []ipfamily.Family
	for i, m := range matches {
		r, err := m.rule()
		if err != nil {
			return nil, fmt.Errorf("arm nftrace table %q: match %d: %w", table, i, err)
		}
		if _, ok := byFam[m.Family]; !ok {
			fams = append(fams, m.Family)
		}
		byFam[m.Family] = append(byFam[m.Family], r)
	}
	slices.Sort(fams)
	if ns == nil {
		return nil, fmt.Errorf("arm nftrace table %q: no network namespace given", table)
	}
	conn, err := netlink.New(ns)
	if err != nil {
		return nil, fmt.Errorf("arm nftrace table %q: %w", table, err)
	}
	var txs []*nft.Tx
	for _, f := range fams {
		tx := nft.NewTx(f, table)
		tx.CreateTable()
		for _, ch := range []string{ChainPrerouting, ChainOutput} {
			tx.AddChain(&nft.Chain{Name: ch, Hook: &nft.Hook{Type: "filter", Hook: ch, Priority: armPriority}})
			for _, r := range byFam[f] {
				tx.AddRule(ch, r)
			}
		}
		txs = append(txs, tx)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kernelTimeout)
	defer cancel()
	if err := conn.Apply(ctx, txs...); err != nil {
		conn.Close()
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("arm nftrace table %q: a table of that name already exists: %w", table, err)
		}
		return nil, fmt.Errorf("arm nftrace table %q: %w", table, err)
	}
	return &Armed{conn: conn, table: table, families: fams}, nil
}

// kernelTimeout bounds one exchange of Arm or Close with the kernel.
const kernelTimeout = 30 * time.Second

// Table returns the name of the armed tables.
func (a *Armed) Table() string { return a.table }

// Families returns the families armed, in order.
func (a *Armed) Families() []ipfamily.Family { return slices.Clone(a.families) }

// Owns reports whether e comes from one of the armed tables (the marking
// rule itself, and the end-of-chain and policy events of the armed chains),
// so a caller comparing the kernel's path with svcnet's can drop them.
func (a *Armed) Owns(e Event) bool {
	if e.Table != a.table {
		return false
	}
	for _, f := range a.families {
		if uint8(e.Family) == f.Proto() {
			return true
		}
	}
	return false
}

// Packets splits events into the packets they belong to: a new packet starts
// at each event of an armed marking rule (it carries the packet's headers),
// that is at the packet's first hook in the namespace, or again when it comes
// back in over loopback still selected by a match. Events before the first
// such event form a group of their own. Event.ID cannot do this: the kernel
// may give two packets of a flow the same ID (see the package doc).
func (a *Armed) Packets(evs []Event) [][]Event {
	var out [][]Event
	for _, e := range evs {
		if len(out) == 0 || a.Owns(e) && e.Handle != 0 && e.Packet != nil {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], e)
	}
	return out
}

// Close deletes the armed tables, each by family and name in a transaction
// of its own. It is idempotent: a second Close, or a table that is already
// gone, is not an error. Packets already marked keep their mark (and so keep
// producing events) until they leave the namespace.
func (a *Armed) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), kernelTimeout)
	defer cancel()
	var errs []error
	for _, f := range a.families {
		tx := nft.NewTx(f, a.table)
		tx.DeleteTable()
		if err := a.conn.Apply(ctx, tx); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete nftrace table %s %s: %w", nft.Keyword(f), a.table, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	a.closed = true
	return a.conn.Close()
}

// rule checks the match and returns its marking rule: the matches in the
// order of the Arm doc, then `meta nftrace set 1`.
func (m Match) rule() (*nft.Rule, error) {
	if m.Family != ipfamily.IPv4 && m.Family != ipfamily.IPv6 {
		return nil, fmt.Errorf("family %d is neither IPv4 nor IPv6", m.Family)
	}
	r := nft.R()
	for _, p := range []struct {
		prefix netip.Prefix
		field  nft.Field
		what   string
	}{{m.Src, nft.FieldSaddr, "source"}, {m.Dst, nft.FieldDaddr, "destination"}} {
		if !p.prefix.IsValid() {
			continue
		}
		a := p.prefix.Addr()
		if a.Is4() != (m.Family == ipfamily.IPv4) || a.Is4In6() {
			return nil, fmt.Errorf("%s %s is not a %s prefix", p.what, p.prefix, nft.Keyword(m.Family))
		}
		if p.prefix.Bits() == 0 {
			continue
		}
		r.Exprs = append(r.Exprs, nft.AddrMatch{Field: p.field, Prefix: p.prefix.Masked()})
	}
	if m.Proto != 0 {
		r.Exprs = append(r.Exprs, nft.ProtoMatch{Proto: m.Proto})
	}
	for _, p := range []struct {
		port  uint16
		field nft.Field
	}{{m.Sport, nft.FieldSport}, {m.Dport, nft.FieldDport}} {
		if p.port != 0 {
			r.Exprs = append(r.Exprs, nft.PortMatch{Field: p.field, Port: p.port})
		}
	}
	r.Exprs = append(r.Exprs, nft.SetNftrace{})
	return r, nil
}

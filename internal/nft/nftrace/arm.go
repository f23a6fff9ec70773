package nftrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
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
	ns       *netns.NS // own handle on the namespace, closed by Close
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
// transaction; a table of that name that already exists in one of those
// families fails it, and then nothing at all is created (Arm never adopts a
// table it did not make). Arm marks packets only: it never changes a verdict.
func Arm(ns *netns.NS, table string, matches []Match) (*Armed, error) {
	if table == "" || len(table) >= unix.NFT_TABLE_MAXNAMELEN {
		return nil, fmt.Errorf("arm nftrace table %q: invalid name", table)
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("arm nftrace table %q: no match given", table)
	}
	byFam := map[ipfamily.Family][][]expr.Any{}
	var fams []ipfamily.Family
	for i, m := range matches {
		exprs, err := m.exprs()
		if err != nil {
			return nil, fmt.Errorf("arm nftrace table %q: match %d: %w", table, i, err)
		}
		if _, ok := byFam[m.Family]; !ok {
			fams = append(fams, m.Family)
		}
		byFam[m.Family] = append(byFam[m.Family], exprs)
	}
	slices.Sort(fams)
	if ns == nil {
		return nil, fmt.Errorf("arm nftrace table %q: no network namespace given", table)
	}
	own, err := netns.OpenPath(ns.Path())
	if err != nil {
		return nil, fmt.Errorf("arm nftrace table %q: %w", table, err)
	}
	err = own.Do(func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		for _, f := range fams {
			t := c.CreateTable(&nftables.Table{Name: table, Family: nftables.TableFamily(f.Proto())})
			for _, ch := range []struct {
				name string
				hook *nftables.ChainHook
			}{{ChainPrerouting, nftables.ChainHookPrerouting}, {ChainOutput, nftables.ChainHookOutput}} {
				accept := nftables.ChainPolicyAccept
				chain := c.AddChain(&nftables.Chain{
					Name: ch.name, Table: t, Type: nftables.ChainTypeFilter,
					Hooknum: ch.hook, Priority: nftables.ChainPriorityRef(armPriority), Policy: &accept,
				})
				for _, exprs := range byFam[f] {
					c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: exprs})
				}
			}
		}
		return c.Flush()
	})
	if err != nil {
		own.Close()
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("arm nftrace table %q: a table of that name already exists: %w", table, err)
		}
		return nil, fmt.Errorf("arm nftrace table %q: %w", table, err)
	}
	return &Armed{ns: own, table: table, families: fams}, nil
}

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

// Close deletes the armed tables, each by family and name. It is idempotent:
// a second Close, or a table that is already gone, is not an error. Packets
// already marked keep their mark (and so keep producing events) until they
// leave the namespace.
func (a *Armed) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	var errs []error
	err := a.ns.Do(func() error {
		for _, f := range a.families {
			c, err := nftables.New()
			if err != nil {
				return err
			}
			c.DelTable(&nftables.Table{Name: a.table, Family: nftables.TableFamily(f.Proto())})
			if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete nftrace table %s %s: %w", nft.Keyword(f), a.table, err))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete nftrace table %q: %w", a.table, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	a.closed = true
	return a.ns.Close()
}

// exprs compiles the match and the "meta nftrace set 1" statement.
func (m Match) exprs() ([]expr.Any, error) {
	if m.Family != ipfamily.IPv4 && m.Family != ipfamily.IPv6 {
		return nil, fmt.Errorf("family %d is neither IPv4 nor IPv6", m.Family)
	}
	var out []expr.Any
	srcOff, dstOff, alen := uint32(12), uint32(16), 4
	if m.Family == ipfamily.IPv6 {
		srcOff, dstOff, alen = 8, 24, 16
	}
	for _, p := range []struct {
		prefix netip.Prefix
		off    uint32
		what   string
	}{{m.Src, srcOff, "source"}, {m.Dst, dstOff, "destination"}} {
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
		pfx := p.prefix.Masked()
		out = append(out, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: p.off, Len: uint32(alen)})
		if p.prefix.Bits() < alen*8 {
			out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(alen),
				Mask: maskBytes(p.prefix.Bits(), alen), Xor: make([]byte, alen)})
		}
		out = append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: pfx.Addr().AsSlice()})
	}
	if m.Proto != 0 {
		out = append(out,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{m.Proto}})
	}
	for _, p := range []struct {
		port uint16
		off  uint32
	}{{m.Sport, 0}, {m.Dport, 2}} {
		if p.port == 0 {
			continue
		}
		out = append(out,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: p.off, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, p.port)})
	}
	return append(out,
		&expr.Immediate{Register: 1, Data: []byte{1}},
		&expr.Meta{Key: expr.MetaKeyNFTRACE, SourceRegister: true, Register: 1}), nil
}

// maskBytes returns a network mask of bits ones in n bytes.
func maskBytes(bits, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		switch {
		case bits >= 8:
			b[i] = 0xff
			bits -= 8
		case bits > 0:
			b[i] = byte(0xff << (8 - bits))
			bits = 0
		}
	}
	return b
}

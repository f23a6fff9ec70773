package hostport

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// Manager programs the hostport tables of one network namespace through an
// nft.Conn (internal/nft/netlink in the plugin, nft.Fake in unit tests).
//
// Contract: each method reads a family's table and then commits at most one
// transaction to it; callers serialise Managers of one namespace (the plugin
// holds its IPAM store lock), otherwise a concurrent change between the read
// and the commit may make the commit fail (it never half-applies).
type Manager struct{ conn nft.Conn }

// NewManager returns a Manager using conn.
func NewManager(conn nft.Conn) *Manager { return &Manager{conn: conn} }

var families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}

// read returns family f's table, nil when it does not exist.
func (m *Manager) read(ctx context.Context, f ipfamily.Family) (*nft.Table, error) {
	t, err := m.conn.Read(ctx, f, TableName)
	if errors.Is(err, nft.ErrNoTable) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read table %s %s: %w", nft.Keyword(f), TableName, err)
	}
	return t, nil
}

// podIP returns the address of family f among podIPs (invalid if none).
func podIP(f ipfamily.Family, podIPs []netip.Addr) netip.Addr {
	for _, a := range podIPs {
		if familyOf(a) == f {
			return a
		}
	}
	return netip.Addr{}
}

// Add makes o's mappings ms effective for the pod addresses podIPs: in each
// family that has a pod address and a mapping, the owner's objects are
// (re)written in one transaction; in a family without, any objects of o are
// removed. A table is created only when it gets a mapping.
func (m *Manager) Add(ctx context.Context, o Owner, podIPs []netip.Addr, ms []Mapping) error {
	for _, f := range families {
		cur, err := m.read(ctx, f)
		if err != nil {
			return err
		}
		obj := Desired(f, o, podIP(f, podIPs), ms)
		var tx *nft.Tx
		if obj == nil {
			tx = RemoveTx(f, cur, OwnedBy(cur, o))
		} else if tx, err = AddTx(f, cur, obj); err != nil {
			return fmt.Errorf("hostports of %s/%s: %w", o.ContainerID, o.IfName, err)
		}
		if err := m.conn.Apply(ctx, tx); err != nil {
			return fmt.Errorf("hostports of %s/%s: %w", o.ContainerID, o.IfName, err)
		}
	}
	return nil
}

// Remove deletes o's objects (OwnedBy) from both tables (one transaction
// each); another owner's chains stay, even one whose name hashes alike.
// Removing what is not there succeeds.
func (m *Manager) Remove(ctx context.Context, o Owner) error {
	return m.remove(ctx, func(t *nft.Table) func(string) bool { return OwnedBy(t, o) })
}

// GC deletes the objects of every attachment of network that valid rejects.
// It returns the chains it removed.
func (m *Manager) GC(ctx context.Context, network string, valid func(Owner) bool) ([]string, error) {
	var removed []string
	err := m.remove(ctx, func(t *nft.Table) func(string) bool {
		stale := map[string]bool{}
		for _, c := range StaleChains(t, network, valid) {
			stale[c] = true
			removed = append(removed, fmt.Sprintf("%s %s", t.Family, c))
		}
		return func(c string) bool { return stale[c] }
	})
	return removed, err
}

// remove applies RemoveTx to each family's table, carrying on past errors.
func (m *Manager) remove(ctx context.Context, stale func(*nft.Table) func(string) bool) error {
	var errs []error
	for _, f := range families {
		cur, err := m.read(ctx, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cur == nil {
			continue
		}
		if err := m.conn.Apply(ctx, RemoveTx(f, cur, stale(cur))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Check verifies that the tables hold exactly o's objects for podIPs and ms
// (and the skeleton wherever o has objects); the error describes every
// difference.
func (m *Manager) Check(ctx context.Context, o Owner, podIPs []netip.Addr, ms []Mapping) error {
	var errs []error
	for _, f := range families {
		cur, err := m.read(ctx, f)
		if err != nil {
			return err
		}
		if d := Diff(f, cur, o, Desired(f, o, podIP(f, podIPs), ms)); d != "" {
			errs = append(errs, fmt.Errorf("table %s %s: %s", nft.Keyword(f), TableName, d))
		}
	}
	return errors.Join(errs...)
}

package trace

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/ebpf/tclb"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
)

// TCMaps reads what a node's tc load balancer holds (tclb.View): a
// frontend's backends (found false: no services entry) and the connection
// it made for a client.
type TCMaps interface {
	Service(frontend netip.AddrPort, proto model.Protocol) (backends []tclb.Backend, pol tclb.Policy, found bool, err error)
	Conn(client, frontend netip.AddrPort, proto model.Protocol) (c tclb.Conn, found bool, err error)
	MaglevSlot(frontend netip.AddrPort, proto model.Protocol, slot uint32) (backend netip.AddrPort, found bool, err error)
	Close() error
}

// TCMapsFunc opens the maps of the tc load balancer on node's interface
// iface.
type TCMapsFunc func(node, iface string) (TCMaps, error)

// KernelTCMaps opens the maps of the tc load balancer attached to the
// interface of each node's network namespace, which nsOf names.
func KernelTCMaps(nsOf func(node string) (string, error)) TCMapsFunc {
	return func(node, iface string) (TCMaps, error) {
		name, err := nsOf(node)
		if err != nil {
			return nil, err
		}
		var v *tclb.View
		err = netns.DoNamed(name, func() error {
			ifc, err := net.InterfaceByName(iface)
			if err != nil {
				return err
			}
			v, err = tclb.OpenAttached(ifc.Index)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("node %s: %s: %w", node, iface, err)
		}
		return v, nil
	}
}

// tcKernel is what a node's tc load balancer maps say about a traced
// connection: the differences from the trace, what agreed, and the
// connection the programs made (found false: none).
type tcKernel struct {
	diffs   []string
	checked string
	conn    tclb.Conn
	found   bool
}

// checkTC compares the tc load balancer's decision in tr with its maps on
// the entry node, after the probe: a frontend the trace says it holds has
// an entry with exactly the traced backends (as a set) and policy, and the
// probe's connection is in conns, to one of them, with the traced
// translation (a remote backend's SNAT, a local one's masquerade mark); a
// frontend the trace leaves to the rules has no entry.
func checkTC(tr *Trace, open TCMapsFunc) (tcKernel, error) {
	x := tr.TC
	var k tcKernel
	proto, err := modelProtocol(x.Proto)
	if err != nil {
		return k, err
	}
	key := fmt.Sprintf("%s/%s", x.Frontend, x.Proto)
	where := fmt.Sprintf("node %s's tc load balancer (%s)", x.Node, x.Hook)
	m, err := open(x.Node, x.Iface)
	if errors.Is(err, tclb.ErrNotAttached) && !x.Held {
		k.checked = fmt.Sprintf("node %s: no tc load balancer attached to %s, as traced: the nftables rules decide %s", x.Node, x.Iface, key)
		return k, nil
	} else if errors.Is(err, tclb.ErrNotAttached) {
		k.diffs = append(k.diffs, fmt.Sprintf("node %s: the trace has its tc load balancer decide %s, but %v (is svcnet proxy running with --ebpf-external?)", x.Node, key, err))
		return k, nil
	} else if err != nil {
		return k, fmt.Errorf("verify: tc load balancer: %w", err)
	}
	defer m.Close()
	bes, pol, found, err := m.Service(x.Frontend, proto)
	local := pol.Local
	if err != nil {
		return k, fmt.Errorf("verify: node %s: %w", x.Node, err)
	}
	got := make([]netip.AddrPort, len(bes))
	for i, b := range bes {
		got[i] = b.AddrPort
	}
	switch {
	case !x.Held && found:
		k.diffs = append(k.diffs, fmt.Sprintf("%s holds %s (backends %s), but the trace leaves it to the nftables rules (%s)", where, key, addrList(got), x.Left))
		return k, nil
	case !x.Held:
		k.checked = fmt.Sprintf("%s: its services map has no entry for %s, as traced: the nftables rules decide", where, key)
		return k, nil
	case !found:
		k.diffs = append(k.diffs, fmt.Sprintf("%s has no services map entry for %s, but the trace has it send the connection to one of %s", where, key, addrList(x.Backends)))
		return k, nil
	case !sameSet(got, x.Backends):
		k.diffs = append(k.diffs, fmt.Sprintf("%s: the services map entry for %s has backends %s, but the trace has %s", where, key, addrList(got), addrList(x.Backends)))
		return k, nil
	case local != x.LocalPolicy:
		k.diffs = append(k.diffs, fmt.Sprintf("%s: the services map entry for %s has the Local policy %v, but the trace has %v", where, key, local, x.LocalPolicy))
		return k, nil
	}
	k.checked = fmt.Sprintf("%s: the services map entry for %s has backends %s, as traced", where, key, addrList(got))
	if !x.Translated() {
		return k, nil
	}
	if x.Maglev {
		// The table is read before the connection: where the probe's
		// connection is missing or went elsewhere, the table tells
		// whether the programs would have chosen as traced.
		be, ok, err := m.MaglevSlot(x.Frontend, proto, x.MaglevSlot)
		switch {
		case err != nil:
			return k, fmt.Errorf("verify: node %s: %w", x.Node, err)
		case !ok:
			k.diffs = append(k.diffs, fmt.Sprintf("%s: the Maglev table of %s has no backend at slot %d, where the trace has %s", where, key, x.MaglevSlot, x.Backend))
			return k, nil
		case be != x.Backend:
			k.diffs = append(k.diffs, fmt.Sprintf("%s: the Maglev table of %s holds %s at slot %d, but the trace has %s", where, key, be, x.MaglevSlot, x.Backend))
			return k, nil
		}
		k.checked += fmt.Sprintf("; its Maglev table holds %s at slot %d, as traced", be, x.MaglevSlot)
	}
	c, ok, err := m.Conn(x.Client, x.Frontend, proto)
	if err != nil {
		return k, fmt.Errorf("verify: node %s: %w", x.Node, err)
	}
	if !ok {
		k.diffs = append(k.diffs, fmt.Sprintf("%s: its conns map has no connection %s → %s after the probe", where, x.Client, key))
		return k, nil
	}
	k.conn, k.found = c, true
	i := -1
	for j, be := range x.Backends {
		if be == c.Backend {
			i = j
		}
	}
	if i < 0 {
		k.diffs = append(k.diffs, fmt.Sprintf("%s: the probe's connection went to %s, none of the traced backends %s", where, c.Backend, addrList(x.Backends)))
		return k, nil
	}
	conn := fmt.Sprintf("the probe's connection %s → %s went to %s", x.Client, key, c.Backend)
	if x.Maglev && c.Backend != x.Backend {
		k.diffs = append(k.diffs, fmt.Sprintf("%s: %s, but under Maglev the trace has its flow hash to slot %d, held by %s", where, conn, x.MaglevSlot, x.Backend))
		return k, nil
	}
	if x.Maglev {
		conn += fmt.Sprintf(", the backend of the Maglev slot %d its flow hashes to, as traced", x.MaglevSlot)
	}
	switch {
	case x.Local[i] && c.SNAT.IsValid():
		k.diffs = append(k.diffs, fmt.Sprintf("%s: %s, on this node, but SNATed to %s: the trace only DNATs it", where, conn, c.SNAT))
	case !x.Local[i] && !c.SNAT.IsValid():
		k.diffs = append(k.diffs, fmt.Sprintf("%s: %s, on another node, without SNAT: the trace SNATs it to the node's address", where, conn))
	case !x.Local[i] && (c.SNAT.Addr() != x.NodeAddr || !tclb.IsSNATPort(c.SNAT.Port())):
		k.diffs = append(k.diffs, fmt.Sprintf("%s: %s, SNATed to %s, but the trace has the node's address %s and a port of %s", where, conn, c.SNAT, x.NodeAddr, tclb.SNATPorts))
	case x.Local[i] && c.Masquerade != !x.LocalPolicy:
		k.diffs = append(k.diffs, fmt.Sprintf("%s: %s with masquerade %v, but the trace has %v", where, conn, c.Masquerade, !x.LocalPolicy))
	case c.SNAT.IsValid():
		k.checked += fmt.Sprintf("; %s, SNATed to %s, as traced", conn, c.SNAT)
	case c.Masquerade:
		k.checked += fmt.Sprintf("; %s with the masquerade mark, as traced", conn)
	default:
		k.checked += fmt.Sprintf("; %s keeping the client's address, as traced", conn)
	}
	return k, nil
}

// tcState describes what node x.Node's tc load balancer holds for the
// traced frontend: whether one is attached, its services entry (the
// backends, sorted, and the policy) and, under Maglev, the backend of the
// traced slot. Verify reads it before the probe and after: the probe met
// the state read before, so a change between the two means the proxy
// programmed the frontend while the probe was under way (a Service just
// created is served by the nftables rules until the maps hold it), and the
// probe's path cannot be held against the state read after.
func tcState(x *TCLB, open TCMapsFunc) (string, error) {
	proto, err := modelProtocol(x.Proto)
	if err != nil {
		return "", err
	}
	m, err := open(x.Node, x.Iface)
	if errors.Is(err, tclb.ErrNotAttached) {
		return "no tc load balancer attached to " + x.Iface, nil
	} else if err != nil {
		return "", fmt.Errorf("verify: tc load balancer: %w", err)
	}
	defer m.Close()
	bes, pol, found, err := m.Service(x.Frontend, proto)
	if err != nil {
		return "", fmt.Errorf("verify: node %s: %w", x.Node, err)
	}
	if !found {
		return "no services map entry", nil
	}
	got := make([]netip.AddrPort, len(bes))
	for i, b := range bes {
		got[i] = b.AddrPort
	}
	slices.SortFunc(got, func(a, b netip.AddrPort) int { return a.Compare(b) })
	s := fmt.Sprintf("backends %s, Local policy %v", addrList(got), pol.Local)
	if !x.Maglev {
		return s, nil
	}
	be, ok, err := m.MaglevSlot(x.Frontend, proto, x.MaglevSlot)
	switch {
	case err != nil:
		return "", fmt.Errorf("verify: node %s: %w", x.Node, err)
	case !ok:
		return s + fmt.Sprintf(", no backend at Maglev slot %d", x.MaglevSlot), nil
	}
	return s + fmt.Sprintf(", %s at Maglev slot %d", be, x.MaglevSlot), nil
}

// tcMoved compares the tc load balancer's state before the probe with the
// one after (tcState): a difference naming both when they differ.
func tcMoved(x *TCLB, before, after string) string {
	if before == after {
		return ""
	}
	return fmt.Sprintf("node %s's tc load balancer (%s) changed %s/%s during the probe: before it, %s; after it, %s", x.Node, x.Hook, x.Frontend, x.Proto, before, after)
}

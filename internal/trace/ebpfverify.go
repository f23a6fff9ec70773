package trace

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/model"
)

// SocketMaps reads what a node's socket load balancer holds
// (socklb.View): a frontend's backends, found false when its services map
// has no entry for it.
type SocketMaps interface {
	Lookup(frontend netip.AddrPort, proto model.Protocol) (backends []netip.AddrPort, found bool, err error)
	Close() error
}

// SocketMapsFunc opens node's socket load balancer maps.
type SocketMapsFunc func(node string) (SocketMaps, error)

// errNoSocketLB wraps the error of a node whose cgroup has no socket load
// balancer attached: a difference from the trace, not a failure to verify.
var errNoSocketLB = socklb.ErrNotAttached

// KernelSocketMaps opens the maps of the socket load balancer attached to
// each node's cgroup, which cgroupOf names.
func KernelSocketMaps(cgroupOf func(node string) (string, error)) SocketMapsFunc {
	return func(node string) (SocketMaps, error) {
		dir, err := cgroupOf(node)
		if err != nil {
			return nil, err
		}
		v, err := socklb.OpenAttached(dir)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		return v, nil
	}
}

// checkSocket compares the socket load balancer's decision in tr with its
// maps on the sender's node: a frontend the trace says it holds has an
// entry with exactly the backends the trace chose among (as a set: the map
// keeps no order that matters, the choice is uniform); a frontend the
// trace leaves to the rules has none. It returns the differences and what
// was checked.
func checkSocket(tr *Trace, open SocketMapsFunc) (diffs []string, checked string, err error) {
	s := tr.Socket
	if s == nil {
		return nil, "", nil
	}
	proto, err := modelProtocol(s.Proto)
	if err != nil {
		return nil, "", err
	}
	key := fmt.Sprintf("%s/%s", s.Frontend, s.Proto)
	m, err := open(s.Node)
	if errors.Is(err, errNoSocketLB) {
		return []string{fmt.Sprintf("node %s: the trace has its socket load balancer decide %s, but %v", s.Node, key, err)}, "", nil
	} else if err != nil {
		return nil, "", fmt.Errorf("verify: socket load balancer: %w", err)
	}
	defer m.Close()
	got, found, err := m.Lookup(s.Frontend, proto)
	if err != nil {
		return nil, "", fmt.Errorf("verify: node %s: %w", s.Node, err)
	}
	where := fmt.Sprintf("node %s's socket load balancer (%s)", s.Node, s.Hook)
	switch {
	case !s.Held && !s.Mapped && found:
		return []string{fmt.Sprintf("%s holds %s (backends %s), but the trace leaves it to the nftables rules (%s)", where, key, addrList(got), s.Left)}, "", nil
	case !s.Held && !s.Mapped:
		return nil, fmt.Sprintf("%s: its services map has no entry for %s, as traced: the nftables rules decide", where, key), nil
	case !found:
		return []string{fmt.Sprintf("%s has no services map entry for %s, but the trace has it %s", where, key, heldWord(s))}, "", nil
	}
	if !sameSet(got, s.Backends) {
		return []string{fmt.Sprintf("%s: the services map entry for %s has backends %s, but the trace has it %s", where, key, addrList(got), heldWord(s))}, "", nil
	}
	return nil, fmt.Sprintf("%s: the services map entry for %s has backends %s, as traced", where, key, addrList(got)), nil
}

// heldWord says what a held entry does.
func heldWord(s *SocketLB) string {
	if len(s.Backends) == 0 {
		return "refuse the connect (no backends)"
	}
	return "translate it to one of " + addrList(s.Backends)
}

// sameSet reports whether a and b hold the same addresses, each as often.
func sameSet(a, b []netip.AddrPort) bool {
	sa, sb := slices.Clone(a), slices.Clone(b)
	cmp := func(x, y netip.AddrPort) int { return x.Compare(y) }
	slices.SortFunc(sa, cmp)
	slices.SortFunc(sb, cmp)
	return slices.Equal(sa, sb)
}

// addrList renders backends: "[a, b]", "[]" for none.
func addrList(bes []netip.AddrPort) string {
	s := make([]string, len(bes))
	for i, be := range bes {
		s[i] = be.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// modelProtocol is a trace's protocol name as a Service protocol.
func modelProtocol(proto string) (model.Protocol, error) {
	for _, p := range []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP} {
		if strings.EqualFold(string(p), proto) {
			return p, nil
		}
	}
	return "", fmt.Errorf("protocol %q: want tcp, udp or sctp: %w", proto, ErrTrace)
}

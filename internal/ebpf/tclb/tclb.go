package tclb

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
	"github.com/svcnet/svcnet/internal/maglev"
	"github.com/svcnet/svcnet/internal/model"
)

// Config is what the programs need to know about the node.
type Config struct {
	// SNAT are the node's addresses, at most one per family, that
	// connections to backends on other nodes leave from. A family without
	// one leaves such connections to the node's rules.
	SNAT []netip.Addr
	// PodCIDRs are the cluster's pod networks, at most one per family:
	// traffic from them to a frontend with a Local policy is left to the
	// node's rules (kube-proxy's short-circuit of pod traffic).
	PodCIDRs []netip.Prefix
	// MasqueradeMark is the packet mark the node's rules masquerade by:
	// a connection to a local backend under externalTrafficPolicy Cluster
	// carries it, so that it reaches the backend from the node's address,
	// as kube-proxy does (0: none, the client's address is kept).
	MasqueradeMark uint32
}

// Backend is one backend of a frontend.
type Backend struct {
	AddrPort netip.AddrPort
	// Local is set for a backend on this node: a connection to it keeps
	// the client's address. Others are reached from a SNAT address.
	Local bool
}

// LB is the tc load balancer: its maps, and its programs attached to the
// node's interfaces. Its methods are safe for concurrent use.
type LB struct {
	mu     sync.Mutex
	objs   tclbObjects
	att    []attached
	svcs   map[tclbSvcKey]uint32 // frontend -> backends held
	pinned bool
	closed bool
}

// Open loads the programs and their maps, writes cfg and attaches the
// programs to the interfaces of ifindexes in the calling thread's network
// namespace (see Mode). Nothing is pinned: Close removes it all.
func Open(cfg Config, mode Mode, ifindexes ...int) (*LB, error) {
	return open(cfg, mode, "", ifindexes)
}

func open(cfg Config, mode Mode, pinDir string, ifindexes []int) (*LB, error) {
	nc, err := nodeConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("tclb: %w", err)
	}
	lb := &LB{svcs: map[tclbSvcKey]uint32{}, pinned: pinDir != ""}
	if err := lb.load(pinDir); err != nil {
		return nil, err
	}
	if err := lb.objs.Node.Put(uint32(0), nc); err != nil {
		return nil, errors.Join(fmt.Errorf("tclb: node config: %w", err), lb.Close())
	}
	if pinDir != "" {
		if err := lb.adopt(); err != nil {
			return nil, errors.Join(fmt.Errorf("tclb: adopt %s: %w", pinDir, err), lb.Close())
		}
		if err := unpinOthers(pinDir, ifindexes); err != nil {
			return nil, errors.Join(fmt.Errorf("tclb: %w", err), lb.Close())
		}
	}
	for _, ifindex := range ifindexes {
		if err := lb.objs.Ifaces.Put(uint32(ifindex), uint8(1)); err != nil {
			return nil, errors.Join(fmt.Errorf("tclb: interface %d: %w", ifindex, err), lb.Close())
		}
		a, err := attach(ifindex, mode, pinDir, lb.objs.TclbIngress, lb.objs.TclbEgress)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("tclb: %w", err), lb.Close())
		}
		lb.att = append(lb.att, a)
	}
	return lb, nil
}

// nodeConfig encodes cfg for the node map.
func nodeConfig(cfg Config) (tclbNodeConfig, error) {
	nc := tclbNodeConfig{MasqMark: cfg.MasqueradeMark}
	var seen4, seen6 bool
	for _, a := range cfg.SNAT {
		if !a.IsValid() || a.Is4In6() || a.IsUnspecified() {
			return nc, fmt.Errorf("SNAT address %v: not an IPv4 or IPv6 address", a)
		}
		if a.Is4() {
			if seen4 {
				return nc, fmt.Errorf("SNAT address %v: a second IPv4 address", a)
			}
			seen4, nc.Snat4 = true, bpfaddr.AddrWords(a)
		} else {
			if seen6 {
				return nc, fmt.Errorf("SNAT address %v: a second IPv6 address", a)
			}
			seen6, nc.Snat6 = true, bpfaddr.AddrWords(a)
		}
	}
	seen4, seen6 = false, false
	for _, p := range cfg.PodCIDRs {
		if !p.IsValid() || p.Addr().Is4In6() {
			return nc, fmt.Errorf("pod CIDR %v: not an IPv4 or IPv6 prefix", p)
		}
		p = p.Masked()
		net, mask := bpfaddr.AddrWords(p.Addr()), bpfaddr.AddrWords(maskOf(p))
		if p.Addr().Is4() {
			if seen4 {
				return nc, fmt.Errorf("pod CIDR %v: a second IPv4 prefix", p)
			}
			seen4, nc.Pods4, nc.Pods4Mask = true, net, mask
		} else {
			if seen6 {
				return nc, fmt.Errorf("pod CIDR %v: a second IPv6 prefix", p)
			}
			seen6, nc.Pods6, nc.Pods6Mask = true, net, mask
		}
	}
	return nc, nil
}

// maskOf is p's mask as an address of the IPv6 form the programs compare
// (an IPv4 prefix's mask covers the ::ffff: part too, so that it never
// matches an IPv6 source).
func maskOf(p netip.Prefix) netip.Addr {
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	var b [16]byte
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
	return netip.AddrFrom16(b)
}

// Policy is how a frontend takes new connections.
type Policy struct {
	// Local is externalTrafficPolicy Local: every backend is local, and
	// traffic from the pod network is left to the rules.
	Local bool
	// Maglev chooses a connection's backend by its flow's hash in the
	// frontend's Maglev table (internal/maglev, MaglevSize slots), the same
	// on every node with the same backends; else at random.
	Maglev bool
}

// MaglevSize is the size of a frontend's Maglev table (Katran's; a prime).
const MaglevSize = maglev.SizeLarge

// SetService makes frontend (an IPv4 or IPv6 address and port) of protocol
// proto take new connections from outside the node to one of backends (of
// its family), chosen by pol. With no backends the
// frontend is deleted (left to the rules, which reject or drop). A UDP
// flow to a backend no longer in the set is forgotten (flushConns): its
// next datagram starts a new one.
func (lb *LB) SetService(frontend netip.AddrPort, proto model.Protocol, backends []Backend, pol Policy) error {
	aps := make([]netip.AddrPort, len(backends))
	for i, b := range backends {
		aps[i] = b.AddrPort
		if pol.Local && !b.Local {
			return fmt.Errorf("tclb: set service %v/%s: backend %v: not local under a Local policy", frontend, proto, b.AddrPort)
		}
	}
	if err := bpfaddr.CheckFrontend(frontend, aps); err != nil {
		return fmt.Errorf("tclb: set service: %w", err)
	}
	if len(backends) == 0 {
		return lb.DeleteService(frontend, proto)
	}
	sk, err := svcKey(frontend, proto)
	if err != nil {
		return fmt.Errorf("tclb: set service %v: %w", frontend, err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return fmt.Errorf("tclb: set service %v/%s: closed", frontend, proto)
	}
	var gone bool
	if proto == model.ProtocolUDP {
		var err error
		if gone, err = lb.backendsLeave(sk, backends); err != nil {
			return fmt.Errorf("tclb: set service %v/%s: %w", frontend, proto, err)
		}
	}
	keys := make([]tclbBackendKey, len(backends))
	vals := make([]tclbBackendValue, len(backends))
	for i, b := range backends {
		keys[i] = tclbBackendKey{Svc: sk, Index: uint32(i)}
		vals[i] = tclbBackendValue{Addr: bpfaddr.AddrWords(b.AddrPort.Addr()), Port: bpfaddr.PortWord(b.AddrPort.Port())}
		if b.Local {
			vals[i].Flags = backendLocal
		}
	}
	if _, err := lb.objs.Backends.BatchUpdate(keys, vals, nil); err != nil {
		return fmt.Errorf("tclb: set service %v/%s: backends: %w", frontend, proto, err)
	}
	sv := tclbSvcValue{Count: uint32(len(backends))}
	if pol.Local {
		sv.Flags |= svcLocal
	}
	if pol.Maglev {
		sv.Flags |= svcMaglev
		if err := lb.setMaglev(sk, aps); err != nil {
			return fmt.Errorf("tclb: set service %v/%s: %w", frontend, proto, err)
		}
	}
	if err := lb.objs.Services.Put(sk, sv); err != nil {
		return fmt.Errorf("tclb: set service %v/%s: %w", frontend, proto, err)
	}
	if !pol.Maglev {
		if err := lb.objs.Maglev.Delete(sk); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("tclb: set service %v/%s: maglev: %w", frontend, proto, err)
		}
	}
	old := lb.svcs[sk]
	lb.svcs[sk] = sv.Count
	if err := lb.deleteBackends(sk, sv.Count, old); err != nil {
		return fmt.Errorf("tclb: set service %v/%s: %w", frontend, proto, err)
	}
	if gone {
		keep := map[netip.AddrPort]bool{}
		for _, b := range backends {
			keep[b.AddrPort] = true
		}
		if err := lb.flushConns(sk, keep); err != nil {
			return fmt.Errorf("tclb: set service %v/%s: %w", frontend, proto, err)
		}
	}
	return nil
}

// backendsLeave reports whether a backend frontend sk holds now is not
// among backends (the services entry's count of slots, read before they
// are overwritten).
func (lb *LB) backendsLeave(sk tclbSvcKey, backends []Backend) (bool, error) {
	stay := make(map[tclbBackendValue]bool, len(backends))
	for _, b := range backends {
		stay[tclbBackendValue{Addr: bpfaddr.AddrWords(b.AddrPort.Addr()), Port: bpfaddr.PortWord(b.AddrPort.Port())}] = true
	}
	for i := range lb.svcs[sk] {
		var v tclbBackendValue
		if err := lb.objs.Backends.Lookup(tclbBackendKey{Svc: sk, Index: i}, &v); err != nil {
			return false, fmt.Errorf("backend %d: %w", i, err)
		}
		v.Flags = 0
		if !stay[v] {
			return true, nil
		}
	}
	return false, nil
}

// connBatch is how many connections flushConns reads per system call.
const connBatch = 4096

// flushConns deletes the connections to frontend sk whose backend is not in
// keep. For UDP, as kube-proxy clears conntrack: a datagram flow has no end
// and would keep a backend that is gone for as long as the client sends.
// It reads the connection table in batches (a whole table of CONN_MAX
// entries in 128 system calls, where one lookup per entry took a million).
func (lb *LB) flushConns(sk tclbSvcKey, keep map[netip.AddrPort]bool) error {
	var (
		stale  []tclbConnKey
		revs   []tclbConnKey
		cursor ebpf.MapBatchCursor
		keys   = make([]tclbConnKey, connBatch)
		vals   = make([]tclbConnValue, connBatch)
	)
	// The kernel walks the table's buckets once, a batch of whole buckets
	// per call (at least half of connBatch entries but at the end, as no
	// bucket nears connBatch/2 entries); the bound only guards against a
	// cursor that never ends.
	for calls := 0; ; calls++ {
		if calls > int(lb.objs.Conns.MaxEntries())/(connBatch/2)+2 {
			return fmt.Errorf("connections: the table's batch reading did not end after %d calls", calls)
		}
		n, err := lb.objs.Conns.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			k, v := keys[i], vals[i]
			if k.Daddr != sk.Addr || k.Dport != sk.Port || k.Proto != sk.Proto {
				continue
			}
			if !keep[netip.AddrPortFrom(bpfaddr.Addr(v.Backend), bpfaddr.Port(v.BackendPort))] {
				stale, revs = append(stale, k), append(revs, v.Rev)
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("connections: %w", err)
		}
	}
	for i := range stale {
		if err := lb.objs.Revnat.Delete(revs[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("connections: %w", err)
		}
		if err := lb.objs.Conns.Delete(stale[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("connections: %w", err)
		}
	}
	return nil
}

// DeleteService removes frontend: new connections to it are left to the
// node's rules (TCP connections already made keep their backend; UDP flows
// are forgotten, flushConns).
func (lb *LB) DeleteService(frontend netip.AddrPort, proto model.Protocol) error {
	sk, err := svcKey(frontend, proto)
	if err != nil {
		return fmt.Errorf("tclb: delete service %v: %w", frontend, err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return fmt.Errorf("tclb: delete service %v/%s: closed", frontend, proto)
	}
	old, ok := lb.svcs[sk]
	if !ok {
		return nil
	}
	if err := lb.objs.Services.Delete(sk); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("tclb: delete service %v/%s: %w", frontend, proto, err)
	}
	delete(lb.svcs, sk)
	if err := lb.objs.Maglev.Delete(sk); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("tclb: delete service %v/%s: maglev: %w", frontend, proto, err)
	}
	if err := lb.deleteBackends(sk, 0, old); err != nil {
		return fmt.Errorf("tclb: delete service %v/%s: %w", frontend, proto, err)
	}
	if proto == model.ProtocolUDP {
		if err := lb.flushConns(sk, nil); err != nil {
			return fmt.Errorf("tclb: delete service %v/%s: %w", frontend, proto, err)
		}
	}
	return nil
}

// deleteBackends deletes the backends of sk with index from..to-1.
func (lb *LB) deleteBackends(sk tclbSvcKey, from, to uint32) error {
	if from >= to {
		return nil
	}
	keys := make([]tclbBackendKey, 0, to-from)
	for i := from; i < to; i++ {
		keys = append(keys, tclbBackendKey{Svc: sk, Index: i})
	}
	if _, err := lb.objs.Backends.BatchDelete(keys, nil); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("backends: %w", err)
	}
	return nil
}

// SNATPorts says which ports a connection to a backend on another node may
// leave the node's address from (bpf/tclb.c SNAT_LOW_COUNT, SNAT_HIGH_MIN):
// the unprivileged ports outside the kernel's default ephemeral range, so
// never one of the node's own connections.
const SNATPorts = "1024–32767 or 61000–65535"

// IsSNATPort reports whether port is one of SNATPorts.
func IsSNATPort(port uint16) bool {
	return (port >= 1024 && port <= 32767) || port >= 61000
}

// Flags of a services entry (bpf/tclb.c SVC_*) and of a backend.
const (
	svcLocal     = 1
	svcMaglev    = 2
	backendLocal = 1
)

// setMaglev writes the Maglev table of backends (named by address and
// port, in their order) as frontend sk's in the maglev map.
func (lb *LB) setMaglev(sk tclbSvcKey, backends []netip.AddrPort) error {
	table, err := NewMaglevTable(backends)
	if err != nil {
		return err
	}
	inner, err := ebpf.NewMap(&ebpf.MapSpec{Name: "maglev_table", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: MaglevSize})
	if err != nil {
		return fmt.Errorf("maglev table: %w", err)
	}
	defer inner.Close()
	slots := make([]uint32, len(table))
	for i := range slots {
		slots[i] = uint32(i)
	}
	if _, err := inner.BatchUpdate(slots, []uint32(table), nil); err != nil {
		return fmt.Errorf("maglev table: %w", err)
	}
	if err := lb.objs.Maglev.Put(sk, inner); err != nil {
		return fmt.Errorf("maglev: %w", err)
	}
	return nil
}

// svcKey is the services map key of a frontend.
func svcKey(frontend netip.AddrPort, proto model.Protocol) (tclbSvcKey, error) {
	p, err := bpfaddr.ProtoNumber(proto)
	if err != nil {
		return tclbSvcKey{}, err
	}
	return tclbSvcKey{Addr: bpfaddr.AddrWords(frontend.Addr()), Port: bpfaddr.PortWord(frontend.Port()), Proto: p}, nil
}

// Close detaches the programs and frees the maps: connections made through
// them lose their translation. Pinned (OpenPinned), the programs stay
// attached and the maps kept, for the next load balancer to adopt.
func (lb *LB) Close() error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return nil
	}
	lb.closed = true
	var errs []error
	for _, a := range lb.att {
		errs = append(errs, a.detach())
	}
	lb.att = nil
	errs = append(errs, lb.objs.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tclb: close: %w", err)
	}
	return nil
}

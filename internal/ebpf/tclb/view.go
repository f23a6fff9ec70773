package tclb

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
	"github.com/svcnet/svcnet/internal/model"
)

// ErrNotAttached is returned by OpenAttached when no tc load balancer is
// attached to the interface.
var ErrNotAttached = errors.New("no tc load balancer attached")

// progIngress is the ingress program's name as the kernel holds it (the
// first 15 bytes of bpf/tclb.c's tclb_ingress).
const progIngress = "tclb_ingress"

// View reads the maps of a tc load balancer that another process (svcnet
// proxy --data-plane ebpf) attached to an interface: the frontends it holds
// and the connections it made. It changes nothing.
type View struct {
	services, backends, conns, maglev *ebpf.Map
}

// OpenAttached finds the tc load balancer attached to the ingress of the
// interface ifindex of the calling thread's network namespace (by tcx, or
// as a cls_bpf filter under clsact) and opens its maps for reading, which
// needs CAP_SYS_ADMIN. The error wraps ErrNotAttached when there is none.
func OpenAttached(ifindex int) (*View, error) {
	id, err := ingressProgram(ifindex)
	if err != nil {
		return nil, fmt.Errorf("tclb: interface %d: %w", ifindex, err)
	}
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return nil, fmt.Errorf("tclb: program %d: %w", id, err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("tclb: program %d: %w", id, err)
	}
	mapIDs, _ := info.MapIDs()
	v := &View{}
	for _, mid := range mapIDs {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("tclb: map %d: %w", mid, err), v.Close())
		}
		mi, err := m.Info()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("tclb: map %d: %w", mid, err), m.Close(), v.Close())
		}
		switch mi.Name {
		case "services":
			v.services = m
		case "backends":
			v.backends = m
		case "conns":
			v.conns = m
		case "maglev":
			v.maglev = m
		default:
			m.Close()
		}
	}
	if v.services == nil || v.backends == nil || v.conns == nil {
		return nil, errors.Join(fmt.Errorf("tclb: program %d: not the tc load balancer's maps", id), v.Close())
	}
	return v, nil
}

// ingressProgram returns the ID of the one tclb_ingress program attached to
// the interface's ingress.
func ingressProgram(ifindex int) (ebpf.ProgramID, error) {
	var ids []ebpf.ProgramID
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	if err == nil {
		for _, p := range res.Programs {
			ids = append(ids, p.ID)
		}
	} else if !errors.Is(err, ebpf.ErrNotSupported) {
		return 0, fmt.Errorf("query tcx programs: %w", err)
	}
	filters, err := netlink.FilterList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: ifindex}}, netlink.HANDLE_MIN_INGRESS)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return 0, fmt.Errorf("list cls_bpf filters: %w", err)
	}
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Id > 0 {
			ids = append(ids, ebpf.ProgramID(bf.Id))
		}
	}
	var found []ebpf.ProgramID
	for _, id := range ids {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			return 0, fmt.Errorf("program %d: %w", id, err)
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			return 0, fmt.Errorf("program %d: %w", id, err)
		}
		if info.Name == progIngress {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return 0, ErrNotAttached
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%d %s programs attached: not one tc load balancer", len(found), progIngress)
}

// Service returns the backends the tc load balancer holds for frontend and
// its policy (ok false: it holds none, and the node's rules decide).
func (v *View) Service(frontend netip.AddrPort, proto model.Protocol) (backends []Backend, pol Policy, ok bool, err error) {
	sk, err := svcKey(frontend, proto)
	if err != nil {
		return nil, pol, false, fmt.Errorf("tclb: %w", err)
	}
	backends, pol, ok, err = readService(v.services, v.backends, sk)
	if err != nil {
		return nil, pol, false, fmt.Errorf("tclb: %v/%s: %w", frontend, proto, err)
	}
	return backends, pol, ok, nil
}

// readService reads the entry of frontend sk from services and its backends
// (ok false: no entry).
func readService(services, backends *ebpf.Map, sk tclbSvcKey) (bes []Backend, pol Policy, ok bool, err error) {
	var sv tclbSvcValue
	if err := services.Lookup(sk, &sv); errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, pol, false, nil
	} else if err != nil {
		return nil, pol, false, fmt.Errorf("services: %w", err)
	}
	for i := range sv.Count {
		var bv tclbBackendValue
		if err := backends.Lookup(tclbBackendKey{Svc: sk, Index: i}, &bv); err != nil {
			return nil, pol, false, fmt.Errorf("backend %d: %w", i, err)
		}
		bes = append(bes, Backend{AddrPort: netip.AddrPortFrom(bpfaddr.Addr(bv.Addr), bpfaddr.Port(bv.Port)), Local: bv.Flags&backendLocal != 0})
	}
	return bes, Policy{Local: sv.Flags&svcLocal != 0, Maglev: sv.Flags&svcMaglev != 0}, true, nil
}

// MaglevSlot returns the backend that slot of frontend's Maglev table
// sends new connections to, as the programs read it (ok false: the
// frontend has no Maglev table, or the slot no backend, or the programs
// are of a version without Maglev).
func (v *View) MaglevSlot(frontend netip.AddrPort, proto model.Protocol, slot uint32) (backend netip.AddrPort, ok bool, err error) {
	sk, err := svcKey(frontend, proto)
	if err != nil {
		return backend, false, fmt.Errorf("tclb: %w", err)
	}
	if v.maglev == nil {
		return backend, false, nil
	}
	var table *ebpf.Map
	if err := v.maglev.Lookup(sk, &table); errors.Is(err, ebpf.ErrKeyNotExist) {
		return backend, false, nil
	} else if err != nil {
		return backend, false, fmt.Errorf("tclb: %v/%s: maglev: %w", frontend, proto, err)
	}
	defer table.Close()
	var index uint32
	if err := table.Lookup(slot, &index); errors.Is(err, ebpf.ErrKeyNotExist) {
		return backend, false, nil
	} else if err != nil {
		return backend, false, fmt.Errorf("tclb: %v/%s: maglev slot %d: %w", frontend, proto, slot, err)
	}
	var bv tclbBackendValue
	if err := v.backends.Lookup(tclbBackendKey{Svc: sk, Index: index}, &bv); errors.Is(err, ebpf.ErrKeyNotExist) {
		return backend, false, nil
	} else if err != nil {
		return backend, false, fmt.Errorf("tclb: %v/%s: backend %d: %w", frontend, proto, index, err)
	}
	return netip.AddrPortFrom(bpfaddr.Addr(bv.Addr), bpfaddr.Port(bv.Port)), true, nil
}

// Conn is a connection the tc load balancer made.
type Conn struct {
	Backend netip.AddrPort
	// SNAT is the node's address and port the backend sees (invalid: the
	// connection was not rewritten at its source by the programs).
	SNAT netip.AddrPort
	// Masquerade is set when the packets carry the masquerade mark (a
	// local backend under the Cluster policy).
	Masquerade bool
	// State is the TCP state as the programs track it: "SYN_SENT",
	// "ESTABLISHED" or "CLOSING" (UDP: "SYN_SENT" until an answer).
	State string
}

// Conn returns the connection from client to frontend (ok false: none).
func (v *View) Conn(client, frontend netip.AddrPort, proto model.Protocol) (c Conn, ok bool, err error) {
	p, err := bpfaddr.ProtoNumber(proto)
	if err != nil {
		return c, false, fmt.Errorf("tclb: %w", err)
	}
	k := tclbConnKey{Saddr: bpfaddr.AddrWords(client.Addr()), Daddr: bpfaddr.AddrWords(frontend.Addr()),
		Sport: bpfaddr.PortWord(client.Port()), Dport: bpfaddr.PortWord(frontend.Port()), Proto: p}
	var cv tclbConnValue
	if err := v.conns.Lookup(k, &cv); errors.Is(err, ebpf.ErrKeyNotExist) {
		return c, false, nil
	} else if err != nil {
		return c, false, fmt.Errorf("tclb: connection %v -> %v/%s: %w", client, frontend, proto, err)
	}
	c.Backend = netip.AddrPortFrom(bpfaddr.Addr(cv.Backend), bpfaddr.Port(cv.BackendPort))
	if cv.Flags&1 != 0 { // CONN_SNAT
		c.SNAT = netip.AddrPortFrom(bpfaddr.Addr(cv.Snat), bpfaddr.Port(cv.SnatPort))
	}
	c.Masquerade = cv.Flags&2 != 0 // CONN_MASQ
	c.State = [...]string{"SYN_SENT", "ESTABLISHED", "CLOSING"}[min(int(cv.State), 2)]
	return c, true, nil
}

// Close releases the view's maps.
func (v *View) Close() error {
	var errs []error
	for _, m := range []*ebpf.Map{v.services, v.backends, v.conns, v.maglev} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

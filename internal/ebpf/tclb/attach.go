package tclb

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/svcnet/svcnet/internal/ebpf/pins"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Mode is how the programs attach to an interface.
type Mode int

const (
	// Auto attaches with tcx, or as cls_bpf filters under clsact when the
	// kernel has no tcx.
	Auto Mode = iota
	// TCX attaches with tcx only.
	TCX
	// Clsact attaches as direct-action cls_bpf filters under a clsact
	// qdisc (made if the interface has none).
	Clsact
)

// filterName names the cls_bpf filters, so that a reader of tc filter show
// knows whose they are.
const filterName = "svcnet-tclb"

// attached is the ingress and egress programs on one interface.
type attached struct {
	ifindex int
	// pinDir is where the tcx links are pinned ("": not pinned). Pinned,
	// the programs stay attached after detach: pinned links stay, and
	// cls_bpf filters are left in place for the next load balancer to
	// replace.
	pinDir  string
	links   []link.Link          // tcx
	filters []*netlink.BpfFilter // clsact
	qdisc   *netlink.GenericQdisc
	// nl is a netlink socket in the interface's network namespace, opened
	// at attach, so that detach finds it from any thread.
	nl *netlink.Handle
}

// attach attaches ingress and egress to the interface ifindex; with
// pinDir, pinned there (tcx) or replacing the filters an earlier load
// balancer left (clsact).
func attach(ifindex int, mode Mode, pinDir string, ingress, egress *ebpf.Program) (attached, error) {
	a := attached{ifindex: ifindex, pinDir: pinDir}
	if mode != Clsact {
		err := a.tcx(ingress, egress)
		if err == nil || mode == TCX || !errors.Is(err, ebpf.ErrNotSupported) {
			return a, err
		}
	}
	return a, a.clsact(ingress, egress)
}

func (a *attached) tcx(ingress, egress *ebpf.Program) error {
	for _, p := range []struct {
		prog *ebpf.Program
		typ  ebpf.AttachType
	}{{ingress, ebpf.AttachTCXIngress}, {egress, ebpf.AttachTCXEgress}} {
		attach := func() (link.Link, error) {
			return link.AttachTCX(link.TCXOptions{Interface: a.ifindex, Program: p.prog, Attach: p.typ})
		}
		var l link.Link
		var err error
		if a.pinDir == "" {
			l, err = attach()
		} else {
			l, err = pins.Link(linkPin(a.pinDir, a.ifindex, p.typ), p.prog, attach)
		}
		if err != nil {
			return errors.Join(fmt.Errorf("tcx %v on interface %d: %w", p.typ, a.ifindex, err), a.detach())
		}
		a.links = append(a.links, l)
	}
	return nil
}

func (a *attached) clsact(ingress, egress *ebpf.Program) error {
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	a.nl = nl
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: a.ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	switch err := a.nl.QdiscAdd(q); {
	case err == nil:
		a.qdisc = q
	case !errors.Is(err, unix.EEXIST):
		return errors.Join(fmt.Errorf("clsact qdisc on interface %d: %w", a.ifindex, err), a.detach())
	}
	for _, p := range []struct {
		prog   *ebpf.Program
		parent uint32
	}{{ingress, netlink.HANDLE_MIN_INGRESS}, {egress, netlink.HANDLE_MIN_EGRESS}} {
		f := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: a.ifindex, Parent: p.parent, Handle: 1,
				Protocol: unix.ETH_P_ALL, Priority: 1},
			Fd: p.prog.FD(), Name: filterName, DirectAction: true,
		}
		if err := a.nl.FilterReplace(f); err != nil {
			return errors.Join(fmt.Errorf("cls_bpf filter on interface %d: %w", a.ifindex, err), a.detach())
		}
		a.filters = append(a.filters, f)
	}
	return nil
}

// detach removes what attach made on the interface.
func (a *attached) detach() error {
	var errs []error
	for _, l := range a.links {
		errs = append(errs, l.Close())
	}
	a.links = nil
	if a.pinDir != "" {
		a.filters, a.qdisc = nil, nil
	}
	for _, f := range a.filters {
		if err := a.nl.FilterDel(f); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("cls_bpf filter on interface %d: %w", a.ifindex, err))
		}
	}
	a.filters = nil
	if a.qdisc != nil {
		if err := a.nl.QdiscDel(a.qdisc); err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("clsact qdisc on interface %d: %w", a.ifindex, err))
		}
		a.qdisc = nil
	}
	if a.nl != nil {
		a.nl.Close()
		a.nl = nil
	}
	return errors.Join(errs...)
}

// linkPin is where the tcx link of an interface's hook is pinned.
func linkPin(pinDir string, ifindex int, typ ebpf.AttachType) string {
	hook := "ingress"
	if typ == ebpf.AttachTCXEgress {
		hook = "egress"
	}
	return filepath.Join(pinDir, fmt.Sprintf("link-%d-%s", ifindex, hook))
}

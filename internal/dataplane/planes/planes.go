// Package planes is the list of svcnet proxy's data planes: the values of
// --data-plane, how to open each in the caller's network namespace, and
// --cleanup over all of them. It is the only package that knows every
// backend; the proxier knows none (internal/dataplane).
package planes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/dataplane"
	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	iptplane "github.com/svcnet/svcnet/internal/dataplane/iptables"
	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/dataplane/userspace"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// None is the --data-plane value of no Service data plane: svcnet proxy then
// programs no Service and runs only what else it was asked to (pod routes,
// the L2 speaker), beside another Service proxy such as kube-proxy.
const None = "none"

// Default is the data plane svcnet proxy runs when none is named.
const Default = nftables.Name

// plane is one backend: its name and how to open it.
type plane struct {
	name string
	open func(Options) (dataplane.DataPlane, func() error, error)
}

var all = []plane{
	{name: nftables.Name, open: openNFTables},
	{name: iptplane.Name, open: openIPTables},
	{name: userspace.Name, open: openUserspace},
	{name: ebpfplane.Name, open: openEBPF},
}

// Options are what opening a plane needs.
type Options struct {
	// Families are the IP families to program (both when empty).
	Families []ipfamily.Family
	// Cgroup is the cgroup v2 path (as /proc/PID/cgroup names it, e.g.
	// /kubepods) whose processes' connects the eBPF plane translates ("":
	// "/", every process of the node); cgroup.Dir finds its directory.
	Cgroup string
	// Scheduler is the eBPF plane's scheduler for Services without
	// svcnet.io/scheduler ("": random).
	Scheduler string
	// PinDir is the directory of a BPF filesystem where the eBPF plane pins
	// its maps and attachments, so that a restarted proxy adopts them ("":
	// nothing pinned). --cleanup removes the pins of Cgroup there.
	PinDir string
	// NoExternal leaves the eBPF plane's connections from outside the node
	// to the nftables rules: no tc programs.
	NoExternal bool
}

// Names returns the accepted --data-plane values: every plane, then None.
func Names() []string {
	out := make([]string, 0, len(all)+1)
	for _, p := range all {
		out = append(out, p.name)
	}
	return append(out, None)
}

// Validate checks that name is an accepted --data-plane value. "ipvs" is
// answered with why svcnet has no such plane (IPVSRefusal).
func Validate(name string) error {
	for _, n := range Names() {
		if n == name {
			return nil
		}
	}
	if name == IPVS {
		return IPVSRefusal(ipvsKernel("/", kernelRelease()))
	}
	ns := Names()
	return fmt.Errorf("--data-plane %q: want %s or %s", name, strings.Join(ns[:len(ns)-1], ", "), ns[len(ns)-1])
}

// Open opens the plane called name in the caller's network namespace. close
// releases its kernel handles (never what it programmed). None has no plane:
// Open refuses it, as any unknown name.
func Open(name string, opt Options) (p dataplane.DataPlane, close func() error, err error) {
	for _, pl := range all {
		if pl.name == name {
			return pl.open(opt)
		}
	}
	if err := Validate(name); err != nil {
		return nil, nil, err
	}
	return nil, nil, fmt.Errorf("--data-plane %s: no Service data plane to open", name)
}

// Cleanup removes what every plane may have programmed in the caller's
// network namespace (svcnet proxy --cleanup, as kube-proxy's cleans up every
// mode). A plane that cannot be opened or cleaned is reported and the others
// are still cleaned.
func Cleanup(ctx context.Context, opt Options) error {
	var errs []error
	for _, pl := range all {
		p, closeFn, err := pl.open(opt)
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s: %w", pl.name, err))
			continue
		}
		if err := p.Cleanup(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s: %w", pl.name, err))
		}
		if err := closeFn(); err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s: close: %w", pl.name, err))
		}
	}
	return errors.Join(errs...)
}

func openNFTables(opt Options) (dataplane.DataPlane, func() error, error) {
	c, err := netlink.New()
	if err != nil {
		return nil, nil, fmt.Errorf("nftables: %w", err)
	}
	return nftables.New(c, opt.Families...), c.Close, nil
}

// openIPTables opens the iptables plane on the variant this node's other
// agents use (iptables.Detect: kubelet's hint chain, else the variant with
// rules, else iptables-nft), as kube-proxy's image chooses. On iptables-nft
// it watches the nf_tables ruleset generation for drift
// (iptplane.GenerationWatch).
func openIPTables(opt Options) (dataplane.DataPlane, func() error, error) {
	v := iptables.Detect(context.Background(), nil)
	b := iptplane.New(&iptables.Exec{Variant: v}, opt.Families...)
	if v != iptables.NFT {
		return b, func() error { return nil }, nil
	}
	c, err := netlink.New()
	if err != nil {
		return nil, nil, fmt.Errorf("iptables: nftables generation: %w", err)
	}
	return iptplane.WatchGeneration(b, c.Generation), c.Close, nil
}

// openUserspace opens the userspace plane: its proxy ports listen on every
// address of the caller's namespace; close closes them and the netlink
// handle.
func openUserspace(opt Options) (dataplane.DataPlane, func() error, error) {
	c, err := netlink.New()
	if err != nil {
		return nil, nil, fmt.Errorf("userspace: %w", err)
	}
	b := userspace.NewBackend(c, userspace.Config{Log: klog.Background().WithName("userspace")}, opt.Families...)
	return b, func() error { return errors.Join(b.Close(), c.Close()) }, nil
}

// openEBPF opens the eBPF plane: the nftables plane's rules, and the socket
// load balancer attached to opt.Cgroup (else the cgroup v2 root) at the
// plane's Probe or first Sync, so that --cleanup attaches nothing; pinned in
// opt.PinDir when set.
func openEBPF(opt Options) (dataplane.DataPlane, func() error, error) {
	c, err := netlink.New()
	if err != nil {
		return nil, nil, fmt.Errorf("ebpf: %w", err)
	}
	dir := func() (string, error) {
		p := opt.Cgroup
		if p == "" {
			p = "/"
		}
		return cgroup.Dir(p)
	}
	open := func() (ebpfplane.SocketLB, error) {
		d, err := dir()
		if err != nil {
			return nil, err
		}
		if opt.PinDir == "" {
			return socklb.Open(d)
		}
		return socklb.OpenPinned(d, opt.PinDir)
	}
	unpin := func() error {
		if opt.PinDir == "" {
			return nil
		}
		d, err := dir()
		if err != nil {
			return err
		}
		return errors.Join(socklb.Unpin(opt.PinDir, d), unpinTCLB(opt.PinDir))
	}
	p := ebpfplane.New(nftables.New(c, opt.Families...), open, unpin, opt.Families...)
	p.SetScheduler(socklb.Scheduler(opt.Scheduler))
	if !opt.NoExternal {
		p.SetExternal(func(nc servicetable.NodeConfig) (ebpfplane.ExternalLB, error) { return openTCLB(nc, opt.PinDir) })
	}
	return p, func() error { return errors.Join(p.Close(), c.Close()) }, nil
}

// compile-time check that the netlink connection is what the backend takes.
var _ nft.Conn = (*netlink.Conn)(nil)

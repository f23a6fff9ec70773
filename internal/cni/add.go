package cni

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/cni/ipam"
	"github.com/svcnet/svcnet/internal/cni/link"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// Add is the ADD command: bridge, forwarding, an address per subnet, the veth
// pair and the pod's addresses and routes, hostPorts; the result goes to
// p.Stdout in the configuration's CNI version.
//
// A repeated ADD of the same container and interface returns the same
// addresses and reconfigures the same veth (no duplicate). A failed ADD
// undoes everything of the attachment (addresses, veth, hostPorts), so
// nothing leaks even if the runtime never sends DEL.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	a := attachment{ContainerID: args.ContainerID, IfName: args.IfName, NetNS: args.Netns}
	if err := validateAttachment(a, true); err != nil {
		return err
	}
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if err := link.CheckNetNS(a.NetNS); err != nil {
		return attachmentError(types.ErrInvalidNetNS, a, "CNI_NETNS is not a network namespace", err)
	}
	ctx, cancel := p.context()
	defer cancel()
	e, err := open(ctx, cfg)
	if err != nil {
		code, reason := openFailure(cfg, err)
		return attachmentError(code, a, reason, err)
	}
	defer e.close()
	res, err := e.add(ctx, a)
	if err != nil {
		if uerr := e.teardown(ctx, a); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return err
	}
	out, err := res.GetAsVersion(cfg.CNIVersion)
	if err != nil {
		return attachmentError(types.ErrIncompatibleCNIVersion, a, "cannot convert the result to version "+cfg.CNIVersion, err)
	}
	return out.PrintTo(p.Stdout)
}

func (e *env) add(ctx context.Context, a attachment) (*types100.Result, error) {
	c := e.cfg
	if err := e.probeHostPorts(ctx); err != nil {
		reason := "cannot check the kernel's nftables features for hostPorts"
		if errors.Is(err, nft.ErrNotSupported) {
			reason = "the kernel lacks an nftables feature hostPorts need"
		}
		return nil, attachmentError(types.ErrInternal, a, reason, err)
	}
	mtu := c.MTU
	if mtu == 0 {
		mtu = DefaultMTU
		if m, ok := e.node.DefaultRouteMTU(); ok {
			mtu = m
		}
	}
	bridge, err := e.node.EnsureBridge(c.Bridge, mtu, gatewayPrefixes(c.Subnets))
	if err != nil {
		return nil, attachmentError(types.ErrInternal, a, "cannot set up bridge "+c.Bridge, err)
	}
	v4, v6 := families(c.Subnets)
	if err := e.node.EnableForwarding(v4, v6); err != nil {
		return nil, attachmentError(types.ErrInternal, a, "cannot enable forwarding on the node", err)
	}
	addrs, err := ipam.Allocate(e.store, a.owner(), c.Subnets)
	if errors.Is(err, ipam.ErrExhausted) {
		return nil, attachmentError(types.ErrTryAgainLater, a, "no free address", err)
	}
	if err != nil {
		return nil, attachmentError(types.ErrIOFailure, a, "cannot allocate addresses in "+c.DataDir, err)
	}
	host, pod, err := e.node.AttachPod(podSpec(c, a, mtu, addrs))
	switch {
	case errors.Is(err, link.ErrExists):
		return nil, attachmentError(ErrInterfaceExists, a, "the container already has an interface of that name", err)
	case errors.Is(err, link.ErrNodeEndTaken):
		return nil, attachmentError(ErrInterfaceExists, a, "the node end's name "+HostVethName(a.ContainerID, a.IfName)+" is another link's", err)
	case errors.Is(err, link.ErrNetNS):
		return nil, attachmentError(types.ErrInvalidNetNS, a, "cannot open the container's network namespace", err)
	case err != nil:
		return nil, attachmentError(types.ErrInternal, a, "cannot set up the veth pair", err)
	}
	if hasMapping(c, ipfamily.IPv4) {
		if err := e.node.SetRouteLocalnet(c.Bridge); err != nil {
			return nil, attachmentError(types.ErrInternal, a, "cannot allow localhost hostPorts", err)
		}
	}
	err = e.hp.Add(ctx, e.hostportOwner(a), addrs, c.PortMappings)
	if errors.Is(err, hostport.ErrConflict) {
		return nil, attachmentError(ErrHostPortConflict, a, "hostPort already in use", err)
	}
	if err != nil {
		return nil, attachmentError(types.ErrInternal, a, "cannot set up hostPorts", err)
	}
	return buildResult(c, a, bridge, host, pod, addrs), nil
}

// probeHostPorts checks, before anything is set up, that the kernel has the
// nftables features hostPort rules need, in each family a mapping applies to
// (hostport.Manager.Probe: about 0.25 ms for both families). A missing one
// fails the ADD with an error naming it (wrapping nft.ErrNotSupported).
func (e *env) probeHostPorts(ctx context.Context) error {
	var fams []ipfamily.Family
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		if hasMapping(e.cfg, f) {
			fams = append(fams, f)
		}
	}
	return e.hp.Probe(ctx, fams)
}

// hasMapping reports whether a port mapping applies to family f and the
// configuration has a subnet of f.
func hasMapping(c *Config, f ipfamily.Family) bool {
	v4, v6 := families(c.Subnets)
	if f == ipfamily.IPv4 && !v4 || f == ipfamily.IPv6 && !v6 {
		return false
	}
	for _, m := range c.PortMappings {
		if m.Applies(f) {
			return true
		}
	}
	return false
}

// teardown removes everything of attachment a: its addresses, its veth pair,
// its hostPort rules. It carries on past failures and reports them all.
func (e *env) teardown(ctx context.Context, a attachment) error {
	var errs []error
	if _, err := ipam.Release(e.store, a.owner()); err != nil {
		errs = append(errs, err)
	}
	if err := e.node.DetachPod(HostVethName(a.ContainerID, a.IfName), a.NetNS, a.IfName, Alias(e.cfg.Name, a.ContainerID, a.IfName)); err != nil {
		errs = append(errs, err)
	}
	if err := e.hp.Remove(ctx, e.hostportOwner(a)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

package cni

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/cni/ipam"
	"github.com/svcnet/svcnet/internal/cni/link"
)

// Del is the DEL command: it frees the attachment's addresses, deletes its
// veth pair and removes its hostPort rules. It is idempotent and best effort:
// an unknown container, a missing or empty CNI_NETNS (or a file or directory
// that is no longer a network namespace), links or rules already gone are all
// success;
// it fails only when something that exists could not be removed (or the IPAM
// store cannot be locked), after trying everything. A CNI_CONTAINERID,
// CNI_IFNAME or CNI_NETNS that breaks the rules of the package doc is refused
// (code 4) before anything is touched: it names no attachment the plugin made.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	a := attachment{ContainerID: args.ContainerID, IfName: args.IfName, NetNS: args.Netns}
	if err := validateAttachment(a, false); err != nil {
		return err
	}
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	netnsPath, problem := netNSForDel(a.NetNS)
	if problem != "" {
		return attachmentError(types.ErrInvalidNetNS, a, problem, nil)
	}
	a.NetNS = netnsPath
	ctx, cancel := p.context()
	defer cancel()
	e, err := open(ctx, cfg)
	if err != nil {
		code, reason := openFailure(cfg, err)
		return attachmentError(code, a, reason, err)
	}
	defer e.close()
	if err := e.teardown(ctx, a); err != nil {
		return attachmentError(types.ErrInternal, a, "cannot remove everything of the attachment", err)
	}
	return nil
}

// GC is the GC command (CNI 1.1): it frees every address, veth and hostPort
// rule of this network whose attachment is not in cni.dev/valid-attachments
// (an absent list keeps nothing). Veths and rules of other networks are never
// touched; the IPAM store (dataDir) belongs to this network alone. It carries
// on past failures and reports them all.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	ctx, cancel := p.context()
	defer cancel()
	e, err := open(ctx, cfg)
	if err != nil {
		code, reason := openFailure(cfg, err)
		return networkError(code, cfg, reason, err)
	}
	defer e.close()
	if err := e.gc(ctx); err != nil {
		return networkError(types.ErrInternal, cfg, "garbage collection incomplete", err)
	}
	return nil
}

func (e *env) gc(ctx context.Context) error {
	valid := map[ipam.Owner]bool{}
	for _, v := range e.cfg.ValidAttachments {
		valid[ipam.Owner{ContainerID: v.ContainerID, IfName: v.IfName}] = true
	}
	var errs []error
	if _, err := ipam.GC(e.store, func(o ipam.Owner) bool { return valid[o] }); err != nil {
		errs = append(errs, err)
	}
	veths, err := e.node.Veths()
	if err != nil {
		errs = append(errs, err)
	}
	for _, v := range veths {
		network, id, ifname, ok := ParseAlias(v.Alias)
		if !ok || network != e.cfg.Name || valid[ipam.Owner{ContainerID: id, IfName: ifname}] {
			continue
		}
		if err := e.node.DeleteLink(v.Name); err != nil {
			errs = append(errs, fmt.Errorf("veth of %s/%s: %w", id, ifname, err))
		}
	}
	_, err = e.hp.GC(ctx, e.cfg.Name, func(o hostport.Owner) bool {
		return valid[ipam.Owner{ContainerID: o.ContainerID, IfName: o.IfName}]
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// netNSForDel returns the CNI_NETNS a DEL works in: path when it is a network
// namespace, "" when the pod side is gone (path empty, nothing there, or the
// regular file or directory a deleted namespace's bind mount leaves). For
// anything else (a FIFO, a device) it returns the reason to refuse it; such a
// file is never opened.
func netNSForDel(path string) (netnsPath, problem string) {
	if path == "" || link.CheckNetNS(path) == nil {
		return path, ""
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return "", "CNI_NETNS is neither a network namespace nor what a deleted one leaves (" + fi.Mode().Type().String() + ")"
	}
	return "", ""
}

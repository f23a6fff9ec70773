package cni

import (
	"errors"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/svcnet/svcnet/internal/cni/ipam"
	"github.com/svcnet/svcnet/internal/cni/link"
)

// Check is the CHECK command: the pod interface, its addresses and routes,
// the node end on the bridge, the bridge's gateways, the IPAM allocation and
// the hostPort rules must match prevResult and the configuration. The error
// (code ErrCheckFailed) lists every difference.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	a := attachment{ContainerID: args.ContainerID, IfName: args.IfName, NetNS: args.Netns}
	if err := validateAttachment(a, true); err != nil {
		return err
	}
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if cfg.PrevResult == nil {
		return attachmentError(types.ErrInvalidNetworkConfig, a, "CHECK needs prevResult", nil)
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

	var obs observed
	obs.Pod, obs.PodErr = link.InspectPod(a.NetNS, a.IfName)
	obs.Host, obs.HostErr = e.node.Link(HostVethName(a.ContainerID, a.IfName))
	obs.Bridge, obs.BridgeErr = e.node.Link(cfg.Bridge)
	if obs.BridgeErr == nil {
		obs.BridgeAddrs, obs.BridgeErr = e.node.Addrs(cfg.Bridge)
	}
	owned, err := ipam.Owned(e.store, a.owner())
	if err != nil {
		return attachmentError(types.ErrIOFailure, a, "cannot read the IPAM store", err)
	}
	obs.Owned = owned
	problems := verify(cfg, a, cfg.PrevResult, obs)
	if err := e.hp.Check(ctx, e.hostportOwner(a), addrsOfResult(cfg.PrevResult), cfg.PortMappings); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			problems = append(problems, "hostPorts: "+line)
		}
	}
	if len(problems) > 0 {
		return attachmentError(ErrCheckFailed, a, "not as ADD left it", errors.New(strings.Join(problems, "; ")))
	}
	return nil
}

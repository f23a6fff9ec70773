package cni

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/svcnet/svcnet/internal/cni/ipam"
)

// Status is the STATUS command (CNI 1.1): success when an ADD could be
// served. It fails with code 50 ("plugin not available") when the IPAM store
// cannot be created or locked or belongs to another network, or when a
// subnet has no free address; the message names the store or the subnet.
// STATUS changes nothing.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	ctx, cancel := p.context()
	defer cancel()
	x, err := ipam.NewStore(cfg.DataDir).Lock(ctx)
	if err != nil {
		return networkError(types.ErrPluginNotAvailable, cfg, "IPAM store "+cfg.DataDir+" is unusable", err)
	}
	defer x.Close()
	if have, err := x.Network(); err != nil || have != "" && have != cfg.Name {
		if err == nil {
			err = fmt.Errorf("it belongs to network %q", have)
		}
		return networkError(types.ErrPluginNotAvailable, cfg, "IPAM store "+cfg.DataDir+" is unusable", err)
	}
	if err := ipam.Available(x, cfg.Subnets); err != nil {
		return networkError(types.ErrPluginNotAvailable, cfg, "cannot allocate addresses", err)
	}
	return nil
}

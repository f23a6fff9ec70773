package cluster

import (
	"context"
	"fmt"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// Cluster is one lab's cluster as a lab command runs it: the lab's names,
// what it remembers about itself (Info, its settings among it), and its
// control plane. Its methods start, find and stop the processes the lab runs
// on it (node agents, the LoadBalancer controller, pods' servers), each under
// its supervisor.
type Cluster struct {
	Names topology.Names
	Info  *Info
	CP    ControlPlane
}

// Open attaches to the control plane of the lab n, which info describes.
func Open(ctx context.Context, n topology.Names, info *Info) (*Cluster, error) {
	c := &Cluster{Names: n, Info: info}
	switch info.ControlPlane {
	case ControlPlaneFile, "":
		f := NewFile(n, info.Stack())
		f.Attach(ControlPlaneSocket(n))
		c.CP = f
	case ControlPlaneKube:
		cp, err := AttachKube(ctx, n)
		if err != nil {
			return nil, err
		}
		c.CP = cp
	default:
		return nil, fmt.Errorf("lab %s: unknown control plane %q", n.Lab, info.ControlPlane)
	}
	return c, nil
}

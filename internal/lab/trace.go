package lab

import (
	"context"
	"net/netip"

	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/source/file"
	"github.com/svcnet/svcnet/internal/trace"
)

// TraceNetwork returns the lab's cluster state and its network as the tracer
// sees it: every node, pod and the client with its network namespace (so the
// tracer reads each node's rules from its kernel and can send probes), the
// node network, and the fabric's gateway.
func (l *Lab) TraceNetwork(ctx context.Context) (*model.Snapshot, *trace.Network, error) {
	res, err := l.Get(ctx)
	if err != nil {
		return nil, nil, err
	}
	snap := file.FromResult(*res, "").Snapshot()
	nsOf := map[string]string{"client": l.c.Names.Client()}
	for i := 1; i <= l.c.Info.Nodes; i++ {
		nsOf[topology.NodeName(i)] = l.c.Names.Node(i)
	}
	for _, p := range snap.Pods() {
		if !p.HostNetwork {
			nsOf[p.Namespace+"/"+p.Name] = l.c.Names.Pod(p.Namespace, p.Name)
		}
	}
	stack := l.c.Info.Stack()
	net := trace.NetworkFrom(snap, map[string][]netip.Addr{"client": stack.ClientAddrs()}, stack.Gateways(), nsOf)
	net.NodeNetworks = stack.NodeNetworks()
	return snap, net, nil
}

// TraceOptions are the tracer's settings for the lab, as its svcnet proxies
// run: --cluster-cidr, --data-plane (the rules the tracer renders, reads
// back and compares are those of the plane the nodes run), and the Service
// network their egress masquerade leaves alone, which they know on the
// embedded control plane (--state: its allocation range) and not on kube.
func (l *Lab) TraceOptions() trace.Options {
	stack := l.c.Info.Stack()
	o := trace.Options{ClusterCIDRs: stack.PodNetworks(), DataPlane: l.c.Info.DataPlane}
	if l.c.Info.ControlPlane == cluster.ControlPlaneFile {
		o.Egress.ServiceCIDRs = stack.ServiceRanges()
	}
	return o
}

package datapathbench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// refClientAddr is a second address of the lab's external client, used only
// by the direct reference of the NodePort and LoadBalancer paths. It is in
// the node network, unused by the lab's IP plan (client .10, nodes .177+).
var refClientAddr = netip.MustParseAddr("172.26.236.11")

// routeReference lets the lab's client reach pod ip (on node podNode) the
// way the NodePort path reaches it: through node1, which forwards to the
// pod's node by its pod-CIDR route. The client gets refClientAddr and a host
// route to ip via node1 from that source; the pod's node routes
// refClientAddr back via node1, so both directions cross node1 and its
// conntrack sees the whole flow (a one-way flow would be conntrack-INVALID,
// which kube-proxy and svcnet drop in forward). Only flows from
// refClientAddr take these routes: every Service path keeps the client's own
// address and the lab's routing. Everything is made inside lab namespaces
// and goes with the lab.
func routeReference(ctx context.Context, l *lab.Lab, ip netip.Addr, podNode int) error {
	client, err := l.Resolve(ctx, "client")
	if err != nil {
		return err
	}
	node, err := l.Resolve(ctx, topology.NodeName(podNode))
	if err != nil {
		return err
	}
	run := func(p lab.Place, where string, argv ...string) (string, error) {
		out, err := l.CommandContext(ctx, p, argv...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w: %s", where, strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
		return string(out), nil
	}
	out, err := run(client, "client", "ip", "-o", "-4", "addr", "show", "to", topology.ClientAddr.String()+"/32")
	if err != nil {
		return err
	}
	dev := ifaceOf(out)
	if dev == "" {
		return fmt.Errorf("client: no interface holds %s: %q", topology.ClientAddr, out)
	}
	via := topology.NodeAddr(1).String()
	steps := []struct {
		p     lab.Place
		where string
		argv  []string
	}{
		{client, "client", []string{"ip", "addr", "replace", refClientAddr.String() + "/32", "dev", dev}},
		{client, "client", []string{"ip", "route", "replace", ip.String() + "/32", "via", via, "src", refClientAddr.String()}},
		{node, topology.NodeName(podNode), []string{"ip", "route", "replace", refClientAddr.String() + "/32", "via", via}},
	}
	for _, s := range steps {
		if _, err := run(s.p, s.where, s.argv...); err != nil {
			return fmt.Errorf("direct reference from the client: %w", err)
		}
	}
	return nil
}

// ifaceOf returns the interface name of the first line of `ip -o addr`
// output ("2: eth0    inet 172.26.236.10/24 ...").
func ifaceOf(out string) string {
	f := strings.Fields(out)
	if len(f) < 2 {
		return ""
	}
	return strings.TrimSuffix(f[1], ":")
}

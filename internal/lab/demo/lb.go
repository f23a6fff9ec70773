package demo

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// DemoLBIP is the external IP svcnet lb gives my-nginx in the demo: the first
// address of the lab's pool, as in the article "Demystifying Kubernetes Services Packet Path".
var DemoLBIP = netip.MustParseAddr("172.26.236.180")

// loadBalancer shows my-nginx's LoadBalancer IP from the external client: which
// node's speaker answers ARP for it, and who answers the requests. With Cluster
// the owner is any ready node and the pods see a node's address; with Local only
// a node with a ready pod may own the IP, and the pods see the client's address.
func (d *demo) loadBalancer(ctx context.Context, l *lab.Lab, svc *corev1.Service, pods []*corev1.Pod, client lab.Place) error {
	var ip netip.Addr
	if ing := svc.Status.LoadBalancer.Ingress; len(ing) > 0 {
		ip, _ = netip.ParseAddr(ing[0].IP)
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	start, failed := time.Now(), len(d.failed)
	defer func() {
		if len(d.failed) > failed {
			d.printSpeakerEvents(l, start.Add(-time.Second))
		}
	}()
	if !local {
		d.say("svcnet lb gave my-nginx the external IP %s from the pool %q (%s). Exactly one node's speaker answers ARP for it on the node network, chosen without a leader by a hash of node name and IP over the ready nodes.", ip, lab.PoolName, lab.PoolRange)
		d.check(ip == DemoLBIP, "status.loadBalancer.ingress is %s", DemoLBIP)
	} else {
		d.say("With externalTrafficPolicy Local only a node with a ready my-nginx pod may own %s: the speakers move it there, and the new owner's gratuitous ARP updates the client at once.", ip)
	}
	if !ip.IsValid() {
		return fmt.Errorf("demo: my-nginx has no LoadBalancer IP")
	}
	url := fmt.Sprintf("http://%s:80/", ip)
	if err := waitAnswer(ctx, l, client, url); err != nil {
		return err
	}
	owner, err := l.WaitAnnouncer(ctx, ip, func(node int) bool { return !local || node != 1 })
	if err != nil {
		return err
	}
	hits, err := l.Curl(ctx, client, url, 20, 2*time.Second)
	if err != nil {
		return err
	}
	d.hits(url, hits)
	fmt.Fprintf(d.out, "    the client's neighbour table: %s is at node%d's MAC\n", ip, owner)
	if !local {
		d.check(answeredBy(hits, pods[0].Name, pods[1].Name), "every request answered, by both pods")
		d.check(clientsIn(hits, topology.NodeAddr(owner).String(), topology.Gateway4(owner).String()),
			"the pods saw node%d's addresses (masquerade), not the client's", owner)
		return nil
	}
	i := slices.IndexFunc(pods, func(p *corev1.Pod) bool { return topology.NodeIndex(p.Spec.NodeName) == owner })
	d.check(i >= 0, "the owner node%d has a my-nginx pod", owner)
	switch {
	case i >= 0 && d.plane == "userspace":
		// The userspace proxy's own connection to the pod loses the
		// client's address under any policy.
		d.check(answeredBy(hits, pods[i].Name) && clientsIn(hits, topology.NodeAddr(owner).String(), topology.Gateway4(owner).String()),
			"answered by %s only, which sees node%d's address (the userspace proxy's connection)", pods[i].Name, owner)
	case i >= 0:
		d.check(answeredBy(hits, pods[i].Name) && allClients(hits, topology.ClientAddr.String()),
			"answered by %s only, client %s kept", pods[i].Name, topology.ClientAddr)
	}
	return nil
}

// clientsIn reports whether every hit succeeded and came from one of ips.
func clientsIn(hits []lab.Hit, ips ...string) bool {
	for _, h := range hits {
		if h.Err != nil || !slices.Contains(ips, h.ClientIP()) {
			return false
		}
	}
	return len(hits) > 0
}

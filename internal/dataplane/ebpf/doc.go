// Package ebpf is svcnet proxy's eBPF data plane (--data-plane ebpf): the
// socket load balancer (internal/ebpf/socklb, cgroup connect and
// getpeername programs) over the nftables plane's rules.
//
// A socket of a process in the plane's cgroup (svcnet proxy --cgroup: on a
// node, the cgroup v2 tree its pods and agents run in) that connects to a
// Service frontend (a ClusterIP, externalIP, LoadBalancer IP or one of this
// node's NodePort addresses, with its port and protocol) is connected to a
// chosen endpoint instead, once: the packets of the connection carry the
// endpoint's address from the first, meet no DNAT and no reverse NAT, and
// getpeername reports the frontend, so the application sees what it dialled.
// A datagram of an unconnected UDP socket is translated likewise when it is
// sent, and an answer from that endpoint is received as from the frontend.
// A frontend with no usable endpoint in the cluster refuses the connect (or
// the send) with ECONNREFUSED at once. The endpoints are the service table's
// (socketEntries): the internal traffic policy's for a ClusterIP, the
// cluster's for the other frontends (kube-proxy's short-circuit of traffic
// from pods and the node), with ready/serving/terminating fallback and
// topology already decided there.
//
// The nftables rules stay under it, complete, and decide everything the
// socket load balancer does not see or leaves alone:
//   - traffic from outside the node (NodePort, externalIPs, LB IPs), with
//     its masquerade, externalTrafficPolicy Local and source ranges;
//   - sockets of processes outside the cgroup;
//   - frontends socketEntries leaves out: ClientIP affinity, a traffic
//     policy that drops (endpoints exist, none for this traffic),
//     loadBalancerSourceRanges, SCTP.
//
// So the plane is never less than the nftables plane, and while the socket
// load balancer is detached (the proxy restarting) connects fall through to
// the rules and still reach an endpoint. Established connections never
// depend on the plane: nothing rewrites their packets.
//
// Selection is uniform random per connect. The programs and maps are
// pinned nowhere: they live as long as the proxy's handles, and a
// restarted proxy loads fresh ones (the getpeername answer of a connection
// made before the restart is then the endpoint's address). A Service change
// is a few map updates; no program is reloaded.
package ebpf

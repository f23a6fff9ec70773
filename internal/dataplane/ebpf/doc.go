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
// sent, and an answer from that endpoint is received as from the frontend;
// a UDP socket's connect is left to the rules (LeftConnectedUDP).
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
//   - sockets of processes outside the cgroup, and connected UDP sockets;
//   - frontends socketEntries leaves out: a traffic policy that drops
//     (endpoints exist, none for this traffic), loadBalancerSourceRanges,
//     SCTP.
//
// So the plane is never less than the nftables plane, and while the socket
// load balancer is detached (the proxy restarting) connects fall through to
// the rules and still reach an endpoint. Established connections never
// depend on the plane: nothing rewrites their packets.
//
// Selection is uniform random per connect; under ClientIP affinity a
// client (a socket's network namespace: a pod, or the node, where
// kube-proxy keys on the source address, which a connect does not have
// yet) keeps the endpoint of its last connect for the timeout, while that
// endpoint stays. Pinned (--bpf-pin-dir), the socket load balancer outlives
// the proxy and the next one adopts it; unpinned, it leaves with the proxy
// and the next one loads it afresh (connects meanwhile meet the rules). A
// Service change is a few map updates; no program is reloaded.
package ebpf

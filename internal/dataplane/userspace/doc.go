// Package userspace is the userspace data plane, the mode kube-proxy had
// before iptables: every Service port gets a listening
// socket on the node (a proxy port), the kernel's redirect rules send the
// Service's traffic to it, and the proxy opens a second connection of its
// own to an endpoint and copies bytes between the two.
//
// # Its place
//
// Correctness and teaching, not speed: every byte crosses user space twice,
// and a connection costs two sockets and two goroutines. What it shows that
// the kernel planes cannot is what a proxy can do with a connection it
// owns: when the connect to an endpoint fails (refused, timed out,
// unreachable), the proxy tries another endpoint, so a pod that died before
// the endpoints caught up costs a retry, not a failed request. iptables and
// nftables pick an endpoint once per flow, and a dead pick fails the
// client's connect.
//
// # What it does
//
// The input is the service table (internal/servicetable), where every
// Kubernetes semantic is decided: the proxy reads a Service port's endpoint
// sets as the nftables plane does. An entry gets one proxy port per endpoint
// set its policies use: SetCluster (ClusterEndpoints) when
// UsesClusterEndpoints, SetLocal (LocalEndpoints) when UsesLocalEndpoints.
// Which traffic goes to which (ClusterIP traffic by internalTrafficPolicy;
// external traffic by externalTrafficPolicy, with the short-circuit of pod
// and node traffic to the cluster set) is the redirect rules' to say (see
// The plane, below), as the service chain and the local chain are in the
// nftables plane.
//
//   - TCP: accept; choose an endpoint; dial it with DialTimeout; on failure
//     choose another not yet tried, at most Attempts endpoints and
//     RetryBudget in all; then copy both ways, passing on each half-close
//     (CloseWrite) so request-then-EOF protocols work, and close both
//     sockets when both directions have ended or one fails. No reachable
//     endpoint (or an empty set) resets the client's connection at once.
//   - UDP: a session per client address, with a connected socket to the
//     endpoint chosen for it; replies leave from the proxy socket; a session
//     ends after UDPIdleTimeout without a datagram either way, or when the
//     endpoint refuses one (ICMP port unreachable). UDP has no connect to
//     fail, so its retry is the client's: the refused datagram is lost,
//     the client is unpinned from that endpoint, and its next datagram
//     opens a session to another. At most MaxUDPSessions per proxy port: a
//     new client beyond them is dropped, as is every datagram when the set
//     is empty.
//   - Selection: RoundRobin (default) or LeastConnections (fewest open TCP
//     connections or UDP sessions through the proxy port); ClientIP affinity
//     (the entry's AffinityTimeout) on top of either: a client goes back to
//     the endpoint of its last successful connection while that endpoint is
//     in the set and the timeout has not passed since.
//   - Stats counts spliced connections, failed connects (each one a retry
//     while the budget lasts), refusals, UDP sessions and dropped datagrams.
//   - Update applies a new set of entries in place: a proxy port whose key
//     remains keeps its socket and its connections and uses the new
//     endpoints from the next connection on; a removed endpoint is never
//     chosen again while its connections run on; a removed entry's proxy
//     port closes.
//
// # The client's address is lost
//
// The endpoint sees a connection from the proxy, not from the client: its
// source address is the node's (the address the proxy's socket has), as in
// kube-proxy's userspace mode. externalTrafficPolicy Local keeps the choice
// of local endpoints but not the source address, and the echo server's
// /clientip answers the node. Only the proxy knows the client, and it logs
// it.
//
// # Seams
//
// Dial, ListenTCP and ListenUDP are injectable (Config): tests dial through
// a function that fails for a chosen endpoint, or use in-memory pipes where
// they need fake time; otherwise the sockets are real, in the namespace of
// the calling process.
//
// # The plane
//
// Backend is the data plane (--data-plane userspace): the Proxy, and per
// family a table of its own, svcnet-userspace, with the redirect rules in
// kube-proxy's userspace layout (Render; rules.go):
//
//   - nat prerouting jumps to portals-container (ClusterIPs, externalIPs,
//     LB IPs) and nodeports-container (NodePorts on @nodeport-ips, the
//     node's NodePort addresses, never loopback): traffic arriving on an
//     interface, from a pod or from outside, is redirected (`redirect to
//     :PORT`, KUBE-PORTALS-CONTAINER's REDIRECT) to the proxy port, on the
//     address of the interface it came in on;
//   - nat output jumps to portals-host and nodeports-host: the node's own
//     traffic is DNATed to the first NodePort address of its family and
//     the proxy port (KUBE-PORTALS-HOST), or redirected to loopback when the
//     family has none. A node address rather than loopback, because the
//     proxy's UDP replies leave from the wildcard socket with the source
//     routing picks for the client, which for the node's own traffic is the
//     node address the DNAT chose, so conntrack finds the flow to undo;
//   - filter prerouting and output at -110 jump to firewall-check:
//     loadBalancerSourceRanges, checked on the original destination before
//     the redirect, as the nftables plane checks them; filter prerouting
//     then jumps to endpoints-check, and filter input holds the other
//     answers of empty endpoint sets (below);
//   - filter forward and output (at -90, after the nat output chain)
//     reject new traffic to a ClusterIP (@cluster-ips) that no rule
//     redirected: a port the Service does not have, as the nftables plane
//     rejects it.
//
// Which proxy port (endpoint set) each kind of traffic reaches is the
// service table's decision, as in the nftables plane: ClusterIP traffic the
// set of internalTrafficPolicy; external traffic from outside the set of
// externalTrafficPolicy, and under Local the traffic of pods (the cluster
// CIDR or pod interface) and of node addresses short-circuited to the
// cluster set. New connections no endpoint can take are answered in the
// kernel, as the nftables plane answers them: rejected (TCP reset to the
// SYN, ICMP port unreachable) when the Service has no usable endpoint,
// dropped when it has some but not in the chosen set (a Local policy
// without a local endpoint). The reject of traffic arriving on an
// interface comes before the redirect, on the Service's own address
// (endpoints-check), so that no translation has to be undone on the
// answer: a reset to a redirected SYN that came in through the pods'
// bridge leaves by the bridge port, past the hooks where conntrack would
// undo the redirect, when br_netfilter is loaded. The node's own traffic,
// and the drops, are answered at input after the redirect, at the proxy
// port (filter-input). The proxy's own reset remains for a set that
// empties between two syncs.
// Proxy ports listen on every address of the node (0.0.0.0
// and ::, one socket per family, on a port the kernel picks), as in
// kube-proxy's userspace mode, so they can also be reached directly on any
// node address.
//
// Sync opens the ports of new entries first, then replaces each family's
// table whose rendering changed in one transaction, then closes the ports
// of removed entries; a failed commit leaves the kernel's table and puts
// the proxy back on the previous entries (a port it had to close comes
// back on another port, which the next, full, Sync programs). Changed
// compares the ruleset generation; a full Sync reads the table back and
// replaces it when it differs (Stats.Drift). Cleanup deletes the table and
// closes every proxy port.
//
// # SCTP
//
// Not served: an SCTP Service port gets no proxy port and no rule, and is
// logged once. Go's net package has no SCTP sockets, and a byte-stream
// splice would lose SCTP's message boundaries and streams. Its traffic to
// the ClusterIP is rejected (ICMP port unreachable) as that of any port
// the ClusterIP lacks; to its NodePort and external addresses it is not
// captured.
//
// # A restart
//
// A proxy port is a socket of the proxy process: when the process ends,
// its ports close and every connection it was splicing ends with it (the
// client sees a reset or EOF), as in kube-proxy's userspace mode. Until the
// new process's first Sync the table it left sends new connections to
// closed ports, where the kernel refuses them. The new process opens new
// ports (the kernel picks other numbers) and its first Sync replaces that
// table in one transaction; established proxied connections are not
// carried over, there being no socket left to carry. So this plane does
// not keep the rule the kernel planes keep, that a crash or restart never
// drops established traffic: a restart ends the connections in flight and
// refuses new ones from the process's end to the new process's first Sync
// (test/proxy's TestRestartWithoutFailedRequest holds it to exactly that).
//
// # What the tracer sees
//
// Rules (Backend.Explainer) renders the table with the proxy's current
// ports, so the simulator follows a packet to the proxy port (the redirect
// is a dnat to the input interface's address). The proxy's own connection
// to the endpoint is a second flow, from the node, that the nf_tables
// tables do not show.
package userspace

// Package userspace is the socket proxy of the userspace data plane, the
// mode kube-proxy had before iptables: every Service port gets a listening
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
// and node traffic to the cluster set) is for the redirect rules to say, as
// the service chain and the local chain are in the nftables plane.
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
// # Left for the plane
//
// This package is the proxy alone. The data plane around it (the
// dataplane.DataPlane methods, Sync calling Update) and the redirect rules
// that send ClusterIP, NodePort, externalIP and LoadBalancer traffic to the
// proxy ports (REDIRECT for traffic to local addresses, DNAT to the proxy
// port for the rest), choosing the proxy port per policy as above, are not
// here.
package userspace

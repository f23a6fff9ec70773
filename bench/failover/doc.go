// Package failoverbench measures how fast a LoadBalancer IP works again after the
// node that announces it fails (make bench-failover).
//
// A 3-node lab (file control plane, every proxy running the layer-2 speaker) gets
// a LoadBalancer Service with one pod on each node. A client loop in the lab's
// external client starts a request to the LB IP every 10 ms (each: TCP connect,
// HTTP GET, answer; 1 s timeout) and records when each succeeded. Each round
// finds the node the client's neighbour table names for the IP (the owner), and:
//
//   - node failure: SIGKILLs the owner's svcnet proxy and cuts the owner off the
//     node network at the same instant, as a crashed node. The figure is the time
//     from the kill to the first request started after it that succeeded: peers
//     notice the missing heartbeats, a new owner is chosen by hash, it sends
//     gratuitous ARP, the client switches.
//   - agent silent: SIGSTOPs only the owner's svcnet proxy (a hung agent: silent,
//     and not restarted, as a killed one is). The node's kernel keeps forwarding
//     (its rules stay), so no request should fail; the figure is the time until
//     the client's neighbour entry names another node (the handover).
//   - agent restart: SIGKILLs only the owner's svcnet proxy, which the lab's
//     supervisor restarts at once. Its peers hear the new incarnation within
//     their Timeout and keep its IPs with it through its restart grace, so the IP
//     should never move and no request fail; both are counted.
//
// After each round the node is reconnected, its proxy let go on (SIGCONT) or
// restarted, and the IP's ownership waited for to settle. Everything stays inside the lab's namespaces.
// It prints p50 and max of each figure against the targets (p50 ≤ 1 s, max ≤ 2 s).
package failoverbench

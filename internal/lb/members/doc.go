// Package members tells the speaker of every node which peer speakers are alive,
// fast enough that a LoadBalancer IP moves to another node well under a second
// after the node answering for it dies.
//
// Mechanism: every speaker sends a small UDP heartbeat (node name, incarnation,
// sequence number) every Interval (default 100 ms) to every peer's node IP on Port
// (default 7947), and counts a peer alive while it has heard from it within
// Timeout (default 400 ms, at least 3×Interval so that two lost datagrams in a
// row never kill a peer) and it said it is ready. A timer fires at the exact moment the oldest alive
// peer's Timeout runs out, so a silent peer is declared dead Timeout after its
// last heartbeat, not when some later packet happens to arrive. A peer that
// stops its Run cleanly sends a "leaving" datagram and is dead at once.
//
// Readiness: a heartbeat also says whether its sender is ready to own IPs
// (SetReady; the speaker sets it after its warm-up). Alive counts only peers
// that are heard and ready, so a restarting node is heard at once but takes
// over nothing until it can answer, and the IPs it gets back move within one
// heartbeat (SetReady sends at once) instead of going unanswered for the
// warm-up.
//
// Why not Node Leases: the kubelet renews its Lease every 10 s and the
// node-lifecycle controller marks a Node NotReady only after its grace period
// (40 s by default, 50 s since Kubernetes 1.32). That is tens of seconds, and it
// measures the kubelet, not the speaker: a crashed svcnet agent on a healthy
// node would keep its IPs forever. Per-IP Leases renewed sub-second would put
// every speaker's writes on the API server's hot path.
//
// Why not memberlist/SWIM (what MetalLB uses): SWIM probes one random member per
// probe interval (1 s in memberlist's LAN profile), waits a probe timeout, asks
// others for indirect probes, and then holds the member "suspect" for a
// suspicion period (4 × max(1, log10 N) probe intervals, so at least 4 s) before
// declaring it dead. That is MetalLB's documented "a few seconds" of failover
// (about 3 s measured when it was introduced). SWIM buys O(N) total traffic for
// thousands of members; a LoadBalancer segment has tens of nodes, where sending
// to everyone is cheap and detection is bounded by Timeout alone.
//
// Cost: N-1 datagrams (24 bytes of payload plus the node name, under 100 bytes
// per frame) sent and N-1 received per Interval on every node; N·(N-1) per Interval cluster-wide.
// At the default 100 ms that is about 1,000 datagrams/s each way per node at
// N=100. The limit is the square: for large clusters configure Interval (and
// Timeout with it) up, trading detection time for traffic linearly.
//
// Trust: a heartbeat counts only when its source IP is one of the addresses
// SetPeers gave for the node it names, and never for this node's own name. This
// stops a misconfigured or confused host, not an attacker who can forge source
// addresses on the node network (who could answer ARP for the IPs directly).
//
// Incarnation: the time New ran, in nanoseconds, standing for the process's
// start. A heartbeat with a newer incarnation than the one known (a restarted
// agent) makes the peer alive at once; an older one is a stray from a previous
// process and is ignored while the newer incarnation is alive. Once the known
// incarnation is dead, any incarnation is accepted, so a node whose clock
// stepped backwards across a restart is not locked out.
package members

// Package members tells the speaker of every node which peer speakers are alive,
// fast enough that a LoadBalancer IP moves to another node well under a second
// after the node answering for it dies.
//
// Mechanism: every speaker sends a small signed UDP heartbeat (node name,
// incarnation, sequence number, timestamp) every Interval (default 100 ms) to
// every peer's node IP on Port (default 7947), and counts a peer alive while it
// has heard an authentic one from it within
// Timeout (default 400 ms, at least 3×Interval so that two lost datagrams in a
// row never kill a peer) and it said it is ready. A timer fires at the exact moment the oldest alive
// peer's Timeout runs out, so a silent peer is declared dead Timeout after its
// last heartbeat, not when some later packet happens to arrive. A peer that
// stops its Run cleanly sends a "leaving" datagram and is dead at once.
//
// Stalls: when this node's own process was stalled (descheduled on a busy
// machine, paused), its clock ran on while the peers' heartbeats queued up
// unread in its socket, and the expiry timer and those datagrams become
// ready together. A peer is therefore not declared dead while datagrams
// wait in the socket's receive queue (SIOCINQ), for at most Interval from
// the moment its Timeout was found run out: reading what queued during a
// stall of any length takes far less, and a sender flooding the port
// cannot keep a dead peer alive for longer than that.
//
// Readiness: a heartbeat also says whether its sender is ready to own IPs
// (SetReady; the speaker sets it after its warm-up). Alive counts only peers
// that are heard and ready, so a starting node is heard at once but takes
// over nothing until it can answer, and the IPs it gets move within one
// heartbeat (SetReady sends at once) instead of going unanswered for the
// warm-up.
//
// Restart grace: a peer whose new incarnation is heard before the old one's
// Timeout ran out (its agent was killed and restarted at once, as a kubelet
// restarts a container) keeps counting alive while it warms up, for
// RestartGrace (10×Timeout, 4 s by default). Its node's data plane went on
// serving while the agent was down (svcnet proxy adopts its rules on restart
// and never flushes them), and the clients' ARP and neighbour caches still
// name it, so flows established through its IPs survive the restart; moving
// the IPs would send those flows to a node that has no conntrack entry for
// them, which resets them. A peer still not ready when the grace ends is
// dropped then; one that restarts after it was declared dead, or that said
// it was leaving, gets no grace.
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
// Cost: N-1 datagrams (64 bytes of payload plus the node name: about 110
// bytes per IPv4 frame for a short name, 40 bytes more than unsigned) sent and
// N-1 received per Interval on every node; N·(N-1) per Interval cluster-wide.
// At the default 100 ms that is about 1,000 datagrams/s each way per node at
// N=100. The limit is the square: for large clusters configure Interval (and
// Timeout with it) up, trading detection time for traffic linearly. The MAC
// costs one HMAC-SHA256 per Interval to sign (one datagram goes to every
// peer) and one per datagram received, under 1 µs each (BenchmarkSignVerify:
// 1.5-1.7 µs for both on a shared 2-core Xeon), so under 1 ms of CPU per
// second at N=100.
//
// Trust: every datagram carries an HMAC-SHA256 over all its bytes, keyed with
// a secret every node shares (Keyring), and counts only when, in this order:
// its MAC verifies under one of the keys (compared in constant time); it names
// a peer, never this node, and comes from one of the addresses SetPeers gave
// for it; its timestamp is within StampWindow (default 5 s) of the receiver's
// clock, either way; and its incarnation and sequence are newer than the last
// heard from that peer (see Incarnation). So a host on the node network that
// forges a node's source address but holds no key can neither make an owner
// "leave" (its IPs would move) nor make a dead node "alive" (they would move to
// a node that cannot answer): an unsigned or wrongly signed datagram fails the
// MAC, and a recorded genuine one fails the sequence while the receiver
// remembers the peer, and the timestamp once it is older than the window
// (after the receiver restarted, or long after the peer died). What remains: a
// recording replayed within the window to a receiver that restarted meanwhile
// can make a dead peer look alive there until the recording is older than the
// window; and anyone with the key, or root on a node, is trusted (they could
// answer ARP for the IPs directly anyway). Node clocks must agree within
// StampWindow: a node whose clock is off by more is dead to its peers (its
// heartbeats are refused as stale-timestamp, and logged). Every refused
// datagram is counted by reason (Config.Rejected; the proxy exports
// svcnet_proxy_speaker_heartbeats_rejected_total{reason}); the first of each
// reason that points at a misconfigured or hostile sender (unsigned, bad
// signature, stale timestamp, malformed) is logged at once, then at most once
// a minute.
//
// Keys: a key file holds one key a line, base64 (what `openssl rand -base64
// 32` prints) or hex, each at least 16 bytes, at most 16 keys; blank lines
// and lines starting with '#' are ignored (ParseKeys). The first key signs,
// every key verifies, and the file is read again every 2 s (WatchKeyFile; a
// new content counts once two reads in a row agree, so a file caught half
// written is never a key), so keys rotate without a restart and without a
// moment when two nodes refuse each other: add the new key as the second
// line on every node; once all have
// it, make it the first line everywhere; once all sign with it, remove the old
// one. In a cluster the file is a Kubernetes Secret mounted into the svcnet
// proxy Pods, as MetalLB's memberlist Secret (deploy/proxy/README.md):
//
//	kubectl -n kube-system create secret generic svcnet-memberlist \
//	  --from-literal=secretkey="$(openssl rand -base64 32)"
//
// read by `svcnet proxy --announce l2 --announce-key-file FILE`, whatever the
// source of state (--kubeconfig or --state). svcnet lab writes a random key
// per lab. Without a key the speaker refuses to start: heartbeats anyone can
// forge give every host on the node network the power to move every
// LoadBalancer IP, and a default that allows it silently is the one that ends
// up deployed. `--announce-insecure` (Config.Insecure) is the explicit
// opt-out, for a node network only trusted hosts can reach: unsigned
// datagrams (wire version 1) both ways. A signed and an insecure speaker
// refuse each other's datagrams.
//
// Incarnation: the time New ran, in nanoseconds, standing for the process's
// start. A heartbeat with a newer incarnation than the one known (a restarted
// agent) makes the peer alive at once; an older one is a stray from a previous
// process and is ignored while the newer incarnation is alive. Once the known
// incarnation is dead, any incarnation is accepted, so a node whose clock
// stepped backwards across a restart is not locked out; a recording of an
// earlier process is still refused by its timestamp once older than
// StampWindow.
package members

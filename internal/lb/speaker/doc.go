// Package speaker decides, on every node and without a leader, which node
// answers ARP/NDP for each LoadBalancer IP (svcnet's layer-2 mode, as MetalLB's),
// and keeps this node's announcer (internal/lb/announce) answering exactly the
// IPs it owns.
//
// Ownership (owner.go, pure): for every VIP-mode ingress IP of our LoadBalancer
// Services that is not a node's own address, the eligible nodes are the Ready
// ones (not labelled node.kubernetes.io/exclude-from-external-load-balancers)
// whose speaker is alive, and for externalTrafficPolicy Local only those with a
// ready endpoint of the Service in the IP's family; Services sharing an IP pool
// their eligible nodes. The owner is the eligible node with the smallest
// sha256(nodeName + "#" + ip), MetalLB's ordering: every node computes the same
// answer from the same inputs, IPs spread evenly, and when a node goes only its
// IPs move.
//
// Liveness comes from internal/lb/members (UDP heartbeats, dead after 400 ms by
// default), not from Node readiness, which lags by tens of seconds. So a killed
// agent's IPs move in well under a second.
//
// Failure modes, inherent to leaderless layer 2: each node decides from its own
// view of who is alive, so while views differ (at most about one Timeout around
// a change) an IP can briefly have two owners or none; a network partition
// between nodes that still reach the clients makes both sides answer until it
// heals. A restarting speaker announces nothing for WarmUp, so that it hears its
// peers before claiming anything and never takes an IP from a live owner just
// because it has not heard from it yet.
package speaker

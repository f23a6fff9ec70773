// Package iptables renders the per-node service table as kube-proxy's
// iptables layout: the filter and nat tables in iptables-restore input, one
// Ruleset per family (the same text for iptables and ip6tables; the family
// decides the address syntax and the REJECT type). Render is pure. Backend
// (backend.go, a dataplane.DataPlane) runs it through internal/iptables'
// Runner: iptables-restore --noflush of Full at start and on drift (deleting
// per-port chains the kernel has and the table has not: adoption without a
// flush), Partial for a change, the Jumps from the built-in chains when
// missing, kube-proxy's KUBE-PROXY-CANARY for the drift check (on
// iptables-nft, the nf_tables ruleset generation as well: GenerationWatch,
// generation.go), Probe of every extension it uses, Cleanup.
//
// For the tracer, Rules (explain.go) is the plane's dataplane.Explainer and
// Translate (translate.go) turns the tables, rendered or read back with
// iptables-save (ReadKernel), into nf_tables tables the packet simulator
// runs, rule for rule, each keeping its text; AdoptHandles gives them
// iptables-nft's rule handles, which the kernel's trace events name.
//
// Layout (kube-proxy's pkg/proxy/iptables, chain for chain):
//
//	nat    PREROUTING, OUTPUT -> KUBE-SERVICES: per frontend a rule to the
//	       port's chain, ending with a jump to KUBE-NODEPORTS per node-port
//	       address; KUBE-NODEPORTS: per NodePort a rule to KUBE-EXT-<hash>
//	       KUBE-SVC-<hash>: masquerade mark for ClusterIP traffic from outside
//	       the pod network (or all of it with --masquerade-all), ClientIP
//	       affinity checks (-m recent --rcheck), then one rule per cluster
//	       endpoint with -m statistic --mode random --probability 1/(n-i)
//	       to its KUBE-SEP-<hash>
//	       KUBE-SVL-<hash>: the same over the node's local endpoints
//	       (internal or external traffic policy Local)
//	       KUBE-EXT-<hash>: entry of NodePort, external IP and LB traffic:
//	       masquerade then KUBE-SVC (policy Cluster), or the short-circuit of
//	       pod and node traffic to KUBE-SVC and the rest to KUBE-SVL (Local)
//	       KUBE-FW-<hash>: loadBalancerSourceRanges; traffic from outside
//	       the ranges falls through un-DNATed
//	       KUBE-SEP-<hash>: hairpin masquerade mark, affinity record
//	       (-m recent --set), DNAT
//	       POSTROUTING -> KUBE-POSTROUTING: masquerade marked packets
//	       (MASQUERADE --random-fully), after clearing the mark; KUBE-MARK-MASQ
//	       sets it (NodeConfig.Mark); then POSTROUTING -> SVCNET-EGRESS-MASQ:
//	       the egress masquerade of pod traffic leaving the cluster (egress.go)
//	filter KUBE-SERVICES (FORWARD, OUTPUT): ClusterIPs with no endpoint
//	       (REJECT) or none on this node under internalTrafficPolicy Local
//	       (DROP); KUBE-EXTERNAL-SERVICES (INPUT, FORWARD): the same for
//	       external IPs, LB IPs and NodePorts; KUBE-PROXY-FIREWALL: drops
//	       what KUBE-FW let fall through; KUBE-NODEPORTS (INPUT): accepts
//	       health check node ports; KUBE-FORWARD: drops conntrack-INVALID
//	       packets and accepts marked and established ones
//
// Chain names and comments follow kube-proxy exactly: the hash is the first
// 16 characters of the base32 SHA-256 of "ns/name:port" + protocol in lower
// case (+ "addr:port" for KUBE-SEP), the comments name the Service port
// ("ns/name:port cluster IP", "ns/name:port -> addr:port"), probabilities
// are kube-proxy's 1/(n-i); every rule is written as iptables-save prints it
// back (internal/iptables.Canonical: -s/-d/-i/-o/-p first, prefix lengths,
// quoted comments, the probability as the kernel keeps it, MARK as
// --set-xmark), so `iptables-save -t nat` reads as on a kube-proxy node and
// in the articles, and the plane compares its chains with the kernel's
// rule for rule (TestKernelReadsBackRendered). Every decision (which endpoints, policies,
// terminating fallback, topology) comes from the service table; the
// renderer only writes it down.
//
// Where it differs from kube-proxy, and why:
//
//   - NodePorts are served on NodeConfig.NodePortAddresses only: KUBE-SERVICES
//     jumps to KUBE-NODEPORTS with -d per address (kube-proxy's form for
//     explicit --nodeport-addresses), and the filter rules for NodePorts
//     without endpoints match those addresses instead of
//     `-m addrtype --dst-type LOCAL`. Never on loopback (CVE-2020-8558), so
//     kubelet's KUBE-FIREWALL localnet rule and route_localnet are not needed.
//   - The rules are written in iptables-save's form, not in kube-proxy's
//     order of options (kube-proxy writes "-m comment ... -m tcp -p tcp -d
//     IP --dport P"; the kernel prints "-d IP/32 -p tcp -m comment ... -m
//     tcp --dport P" for both), and KUBE-SERVICES and KUBE-NODEPORTS hold
//     each Service port's rules together, ports in the descending order of
//     their chain hash rather than by Service name (see byHashDescending:
//     3x faster restores at 10,000 Services; the rules are disjoint, and a
//     packet meets the rules of half the ports on average either way).
//   - REJECT names its type (icmp-port-unreachable, icmp6-port-unreachable),
//     as iptables-save prints it. The nftables plane answers TCP with a reset
//     instead; both refuse the connection.
//   - KUBE-FW lets node-originated traffic through (addrtype LOCAL) when an LB
//     IP lies inside the ranges, as the nftables plane does; kube-proxy allows
//     the LB IP itself as source when the node IP lies in a range.
//   - Comments are never dropped (kube-proxy drops per-endpoint comments above
//     1000 endpoints): the output is the same at any size.
//   - The nftables plane rejects traffic to unknown ports of a ClusterIP (one
//     lookup in its cluster-ips set); as in kube-proxy's iptables mode, that
//     is not rendered: it would take a REJECT rule per ClusterIP in
//     KUBE-SERVICES, walked by the first packet of every new connection the
//     node forwards or sends, whatever its destination.
//     BenchmarkKernelUnknownPortReject prices both forms on a forwarded TCP
//     connect (shared 2-core machine, idle and at load 4-10): 10,000
//     rules add 48-79 µs to the p50 (6-8 ns a rule; 0.13-1.0 ms to the p99)
//     and cut sequential connects to about 40% (25,000/s to 8,500/s idle);
//     1,000 rules add 6-7 µs idle, less than the noise under load; the set
//     lookup adds under 2 µs at either size.
//   - iptables has no verdict maps: KUBE-SERVICES is a list walked rule by rule
//     by the first packet of each connection, O(frontends), where the
//     nftables plane does one map lookup. A partial sync edits KUBE-SERVICES
//     in place (-I and -D by rule number, edit.go) rather than rewriting it
//     as kube-proxy does, but every commit that adds a rule with a verdict
//     makes the kernel validate the whole nat table, and -I at a number
//     makes iptables-nft fetch the chain's rules: about 100 ms each at
//     10,000 Services here, so one Service added costs 0.21 s
//     (BenchmarkKernelSync), where the nftables plane's transaction touches
//     only the port's objects.
//   - ClientIP affinity uses xt_recent lists (one per KUBE-SEP), which hold
//     at most ip_list_tot (default 100) clients each, as in kube-proxy; the
//     nftables plane's sets have no such limit.
//   - The egress masquerade (NodeConfig.Egress) is svcnet's, not
//     kube-proxy's: ip-masq-agent's iptables layout in a chain of svcnet's
//     own, with the nftables plane's choice of destinations (egress.go).
package iptables

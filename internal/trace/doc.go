// Package trace explains what a cluster does to one packet: every hop (sender,
// nodes, receiver), every netfilter hook, chain and rule that decided
// something, every rewrite as a before → after tuple, the endpoint choice with
// each candidate's probability, the routing decisions between places, and the
// reply's way back through conntrack's reverse translations.
//
// The engine is the packet simulator (package nft/sim) run over each node's
// ruleset (read back from the kernel on a live node, or rendered from the
// cluster state exactly as svcnet proxy renders it), joined by a model of the
// cluster network (nodes, pod CIDR routes, bridges). Verification against the
// kernel (package nft/nftrace) sends a real probe with nftrace set and compares
// the kernel's trace events with the simulated steps.
//
// The ruleset is the one of the data plane the nodes run (Options.DataPlane,
// planes.go): the nftables plane's tables as they are; the iptables plane's
// nat and filter tables read back with iptables-save of the node's variant and
// translated rule for rule (iptables.Translate), each step showing
// kube-proxy's rule. On iptables-nft those are nf_tables chains the kernel
// traces, named by rule handles read right after iptables-save; on
// iptables-legacy nftrace sees none of them, and Verify checks instead that
// the rules read back equal the rendered ones and that conntrack's DNAT goes
// to a traced candidate, and reports the node as checked only in part.
//
// The ebpf plane (ebpf.go) is the nftables plane's tables with the socket
// load balancer before them: a connect() from a pod or a node to a frontend
// the node's service table holds is decided at the sender, before any
// packet, by the plane's own decision (internal/dataplane/ebpf.SocketFor):
// translated to one backend (the endpoint choice, each backend equally
// likely), refused with ECONNREFUSED, or left to the rules (a note says
// why). A translated connection's packets carry the backend's address and
// meet the rules with no Service match. Verify reads the socket load
// balancer's maps from the sender node's cgroup (internal/ebpf/socklb.View)
// and compares the traced frontend's entry; its probe, sent from outside
// that cgroup, carries the translated packet, whose way through the rules
// nftrace then checks.
package trace

// Package tclb loads and drives bpf/tclb.c: tc programs on a node's
// interfaces that load-balance connections from outside the node to its
// Service frontends (NodePorts on the node's addresses, externalIPs,
// LoadBalancer IPs) with a connection table of their own, translating each
// packet both ways (see the C file for the path of a packet).
//
// Programs attach with tcx (BPF links) where the kernel has it, else as
// direct-action cls_bpf filters under a clsact qdisc. A frontend's
// backends are set in place: a connection that starts while they change
// meets the old set or the new one, and a connection keeps its backend for
// its life whatever the set becomes (as conntrack keeps a DNAT), until its
// entry expires.
package tclb

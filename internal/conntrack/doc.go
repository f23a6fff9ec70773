// Package conntrack removes stale UDP and SCTP conntrack entries for the
// service proxy, the way kube-proxy's pkg/proxy/conntrack CleanStaleEntries
// does, and sets the conntrack sysctls kube-proxy sets (sysctl.go:
// SysctlConfig, ApplySysctls: table size, TCP and UDP timeouts; a sysctl
// that is read-only where the proxy runs, as nf_conntrack_max is inside a
// network namespace, is skipped with a warning).
//
// Why: a DNAT decision is made once, on the first packet of a flow, and kept
// in the flow's conntrack entry. UDP clients (DNS resolvers above all) keep
// sending from the same source port, so their entry never expires and every
// later packet keeps going to the endpoint chosen first, even after that
// endpoint is gone, and even after the Service got endpoints while the first
// packets were not DNATed at all. Deleting the entry makes the next packet
// pass the NAT rules again and reach a current endpoint. TCP is never
// touched: a TCP connection to a gone endpoint breaks visibly and the client
// reconnects from a new port.
//
// The package has a pure part and a kernel part:
//
//   - Want, Frontend, Flow and Stale (stale.go) decide, without the kernel,
//     whether one flow is stale.
//   - Table is the kernel boundary: List one family's flows, Delete some of
//     them. Netlink implements it over ctnetlink; Fake implements it in
//     memory with state, for tests of callers.
//   - Cleanup lists each family once, picks the stale flows and deletes
//     exactly those.
//
// Network namespaces: a Netlink table talks to the conntrack table of the
// namespace it was created in (NewNetlink: the calling thread's; NewNetlinkIn:
// a given namespace, entered through internal/netns). After creation it may
// be used from any goroutine.
package conntrack

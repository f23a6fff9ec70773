// Package sim simulates one packet's walk through netfilter over svcnet's
// nftables model (package nft): every hook, base chain, rule, verdict and
// rewrite it meets, in the order the kernel applies them. It is the engine of
// the packet tracer (`svcnet trace`) and of the proxy's behaviour tests.
//
// What is modelled, and how faithfully:
//
//   - Hooks. A packet seen at Prerouting (arriving from outside, or from a pod
//     through its veth) goes prerouting → routing decision → input (destination
//     local) or forward → postrouting. A packet seen at Output (locally
//     generated) goes output → routing decision → postrouting, and, when its
//     destination is local, loops back through prerouting → input.
//   - Order within a hook. Filter base chains run in priority order. All nat
//     base chains of a hook run inside the kernel's one NAT hook, registered at a
//     fixed priority (-100 at prerouting and output, 100 at postrouting and
//     input), ordered among themselves by their own priority: a nat chain at
//     priority -150 still runs after a filter chain at -110, as in the kernel.
//     Chains of equal priority run the later registered first (tables read
//     back from the kernel carry their handle, which orders them), else in
//     (table, chain) name order; and the NAT
//     hook after filter chains of its own priority.
//   - NAT. NAT chains are evaluated only for the first packet of a connection
//     (ct state new) and only until a translation of that kind (destination at
//     prerouting/output, source at postrouting/input) is bound; dnat, redirect
//     (a dnat to the input interface's primary address, Context.IfaceAddr, or
//     to loopback at output) and masquerade end their base chain with accept, and the remaining nat chains
//     of the hook are skipped. Later packets of the connection, in either
//     direction, skip the nat chains and get conntrack's translation.
//   - Conntrack. A Simulator remembers each accepted new connection (original
//     and reply tuples) so later packets find it. A Packet with CtState 0 is
//     classified as conntrack would: established when it belongs to a known
//     connection, else new.
//   - Sets. Static elements come from the tables; elements added by `update`
//     live in the Simulator with their timeout, measured on an injected clock.
//   - Randomness. `numgen random` draws from Context.Rand; Enumerate instead
//     follows every branch and returns each distinct outcome with its exact
//     probability.
//
// Not modelled: routing tables (every destination that is not local is
// forwarded or sent out), interfaces, fragments, ICMP errors, conntrack
// timeouts, port allocation by masquerade (the source port is kept).
//
// Contract: simulation is pure and deterministic. It never touches the kernel;
// the same tables, state, packet and context give the same Result. A Simulator
// is not safe for concurrent use, and it reads its tables without copying them:
// they must not change while it is in use.
package sim

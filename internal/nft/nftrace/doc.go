// Package nftrace is the kernel side of `svcnet trace --verify`: it marks
// chosen packets with nftrace in a network namespace (Arm) and reads the
// kernel's nf_tables trace events (NFT_MSG_TRACE on the netlink multicast
// group NFNLGRP_NFTRACE; Listen, Collect), so that the tracer can compare what
// the kernel did with what its simulator predicted. Handles (HandlesOf a
// table read back, or RuleHandles) maps an event's rule handle to the rule's
// index in a chain, the index package nft models rules by.
//
// All of it speaks nf_tables through internal/nft/netlink: arming is an
// ordinary nft transaction (its marking statement is nft.SetNftrace), the
// handles come from the ordinary read-back (nft.Rule.Handle), and the
// listener is a netlink.TraceSocket; this package decodes the events.
//
// Use: Listen first (the kernel only builds events while a socket of the
// namespace listens, and events sent before the subscription are lost), then
// Arm, send the probe, Collect, read the handles, Close both.
//
// # When the kernel emits events
//
// From nf_tables_core.c (nft_do_chain) and nf_tables_trace.c, checked
// against a 6.18 kernel by this package's tests. A packet whose skb has
// nftrace set produces events at every nf_tables base chain it traverses in
// the namespace, in every table (not only the armed one). Within one run of a
// base chain:
//
//   - A rule that does not match (an expression ends it with "break": a
//     failed comparison, a map or set lookup that misses, a header that
//     cannot be loaded) emits nothing.
//   - A rule whose expressions all ran without a verdict (counter, meta mark
//     set, meta nftrace set: the marking rule itself) emits a rule event with
//     its handle and verdict continue.
//   - A rule that ends in a verdict emits it with its handle: accept, drop,
//     queue, stolen (the run of this base chain ends; after an accept the
//     hook's later base chains, of this table or others, still run), jump or
//     goto (Verdict.Chain is the target; the events of that chain follow),
//     return. NAT statements end their rule with verdict accept.
//   - Running past the last rule of any chain (regular or base) emits an
//     end-of-chain event: handle 0, verdict continue (Event.EndOfChain).
//     After a regular chain's end, evaluation resumes after the rule that
//     jumped to it (no event for that resumption).
//   - When a base chain's evaluation ends without accept/drop/queue/stolen
//     (its end, or a return with nothing to return to), a policy event
//     follows: handle 0, Policy the chain's policy.
//
// Event types: the uapi has TypeReturn for the end-of-chain event and for
// rules with verdict return, and old kernels (nft_do_chain of the 4.x era)
// sent it. Current kernels send TypeRule for both: __nft_trace_verdict
// compares the masked verdict (code & NF_VERDICT_MASK) with the negative
// NFT_CONTINUE and NFT_RETURN, which never matches (seen on 6.18). Tell the
// kinds apart by Handle and Verdict, never by Type (EndOfChain does).
//
// What an event carries:
//
//   - The packet's headers (Packet) and interfaces (Iif, Oif) only on the
//     first event of each run of a base chain. NAT rewrites the packet after
//     the nat chain returns, so the nat chain's events show the packet
//     before translation and the first event of the next base chain that
//     runs afterwards shows it after.
//   - Mark: the packet mark after the rule (absent when 0).
//   - Conntrack (CT), on kernels that send it (added upstream in 2025; 6.18
//     does), only once conntrack has seen the packet: never in chains of
//     priority below conntrack's (-200), such as the armed raw chains on a
//     packet's first hook.
//   - NAT chains run only for a connection's first packet; later packets of
//     the connection emit no nat chain events.
//
// ID: the kernel hashes the skb's address, its flow hash and its input
// interface index. It stays the same for one packet through prerouting and
// input, DNAT included, but changes when a locally sent packet comes back in
// over loopback (its input interface is set), and two packets of one flow
// can share one when the kernel reuses the skb's memory (seen: a
// connection's SYN and FIN). Armed.Packets groups events by packet instead.
//
// # Lifetime of the mark
//
// nftrace is a bit of the skb. It survives routing, NAT and loopback within
// the namespace, but skb_scrub_packet clears it (nf_reset_trace, whatever the
// namespaces) and veth's transmit goes through it: a packet crossing a veth
// pair into another namespace arrives unmarked (checked by the tests). To
// trace a packet across namespaces, arm each namespace with matches for the
// packet as it arrives there.
//
// Events are built in softirq context with atomic allocations: when the
// listener's receive buffer overflows the kernel drops them, and Collect
// reports that (ErrOverrun) rather than returning a sequence with holes.
package nftrace

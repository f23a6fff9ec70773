// Package nft is svcnet's model of an nftables table: tables, chains, rules,
// named sets and verdict maps, with exactly the small vocabulary of matches and
// statements the service proxy emits. It renders to nft(8) syntax (golden files,
// `nft -f`, humans), describes changes as atomic transactions (Tx), applies them
// to a state-tracking in-memory kernel (Fake), and is the input of the packet
// simulator and the tracer. The netlink backend (subpackage netlink) compiles it
// to kernel expressions and reads the kernel's table back into it.
//
// Contract: the model is pure data. Rendering is deterministic: chains, sets and
// elements are printed sorted by name or key, so the same table always renders
// to the same bytes.
package nft

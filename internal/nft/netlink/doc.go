// Package netlink is svcnet's one nf_tables boundary, the kernel backend of
// its nftables model (internal/nft): it compiles nft.Tx transactions into one
// nf_tables netlink batch, reads a table back into the model (rule handles
// included: nft.Rule.Handle), reports the ruleset generation, and receives
// the trace events of a namespace (TraceSocket). *Conn implements nft.Conn.
// The nftables data plane, the CNI plugin's hostPort rules and the tracer
// (internal/nft/nftrace: arming is an ordinary transaction) all go through
// it; github.com/google/nftables is used here only for its expression types
// and their encoding.
//
// # Why its own encoder
//
// sigs.k8s.io/knftables (kube-proxy's nftables mode) runs nft(8) and parses
// its text or JSON: it gives no typed read-back of rule bodies, which drift
// repair (compare the kernel's rules with the wanted ones), the live tracer
// (the kernel's rules and their handles) and the simulator (it runs the
// rules read back) all need, and it pays a process and a parse per call.
// google/nftables' Conn does speak netlink, but it asks the kernel to
// acknowledge every message and reads the acknowledgements one by one, sends
// the batch in one sendmsg with the socket's default buffers, and reads
// rules back one chain per dump. Measured on the same transaction (TestScale's
// table, in throwaway namespaces, each way once per run, ratios within a run;
// kernel 6.18, nft 1.0.6, 2 shared cores under load):
//
//	SVCNET_REQUIRE_ROOT=1 go test -run '^$' -bench Wire -benchtime 1x ./internal/nft/netlink
//
//	10000 Services: 30006 chains, 70008 rules, 10000 map elements
//	                   commit   read back
//	svcnet (this)      0.50 s   0.80 s
//	google/nftables    2.22 s   0.96 s    (4.4x, 1.2x)
//	nft -f, nft -j     1.22 s   3.19 s    (2.4x, 4.0x)
//
// (Two more runs: google/svcnet 3.1x and 4.0x to commit, 1.8x and 1.7x to
// read; nft/svcnet 2.7x and 3.1x, 4.1x and 6.2x; 1000 Services: 1.7x to
// 2.5x to commit.) google/nftables' figures are with both socket buffers
// forced to 256 MiB; with the system's defaults its Flush fails already at
// 1000 Services with EMSGSIZE (the batch does not fit the send buffer; the
// acknowledgements, queued before Flush reads the first, need the receive
// buffer: see Transport below). svcnet's
// read back decompiles every rule into the model and checks it by compiling
// it again; google/nftables' returns raw expressions.
//
// Expressions are compiled with github.com/google/nftables/expr exactly as
// nft(8) 1.0.x compiles the same rule text (same expressions, registers,
// lengths and byte orders), so `nft list table` prints what nft.Table.Render
// prints. The one deliberate difference: nft merges adjacent payload matches
// (`th sport 1 th dport 2` becomes one 4-byte compare); this backend emits one
// load per match, which means the same and lists the same except that nft
// prints merged transport-header matches as raw `@th,0,32` when it made them.
//
// Transport. google/nftables' Conn.Flush asks the kernel to acknowledge and
// echo every message and reads the acknowledgements one by one; for the tens of
// thousands of messages of a 10k-service table that overflows the socket
// receive buffer (ENOBUFS after a committed batch) and costs two syscalls per
// message. This package therefore frames the batch itself, into one buffer, as
// nft does: no acknowledgements are requested, the send buffer is sized to the
// batch, and after the batch a GETGEN request serves as a fence: every error
// the kernel reports for the batch arrives before its answer. A batch the
// kernel rejects is aborted as a whole (nf_tables transactions are atomic).
//
// Read decompiles kernel rules into the closed nft.Expr vocabulary. A rule it
// does not recognise (written by someone else, or by a newer svcnet) comes back
// with nil Exprs and a Comment starting with "<unrecognised: " that names the
// kernel expressions, so it never equals a rule svcnet wants and a diff
// replaces it. Decompilation is checked: a decompiled rule is compiled again and
// must give exactly the kernel's expressions, otherwise it is unrecognised.
//
// No anonymous sets or maps are ever created (set lookup by transaction ID is
// quadratic in the kernel); every set is named and referenced by name.
package netlink

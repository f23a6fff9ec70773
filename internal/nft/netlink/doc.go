// Package netlink is the kernel backend of svcnet's nftables model
// (internal/nft): it compiles nft.Tx transactions into one nf_tables netlink
// batch, reads a table back into the model, and reports the ruleset
// generation. *Conn implements nft.Conn.
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

// Package iptables is svcnet's boundary to iptables: the kernel side of the
// iptables data plane. Runner restores and saves tables through
// iptables-restore and iptables-save (the same programs kube-proxy's
// iptables mode runs: the rules are too many for one iptables call each),
// Detect chooses the variant a node already uses (iptables-nft or the legacy
// x_tables one), and Fake is a state-tracking stand-in that applies restore
// input with iptables-restore's semantics, for unit tests of the callers.
//
// Restore semantics (iptables-restore --noflush, as kube-proxy always runs
// it): the input is a sequence of tables, each from "*table" to "COMMIT",
// and each table is committed atomically. A chain declared with ":NAME"
// is created, or flushed when it exists; chains not declared keep their
// rules. "-A" appends, "-I" inserts at the top, "-D" deletes the first rule
// with the same spec, "-X" deletes an empty, unreferenced chain, "-F"
// flushes. A failure anywhere in a table leaves that table as it was.
package iptables

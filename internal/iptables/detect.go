package iptables

import (
	"bytes"
	"context"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// HintChain is the chain kubelet creates in the mangle table of the
// iptables variant the node uses (KUBE-IPTABLES-HINT), for node agents to
// follow.
const HintChain = "KUBE-IPTABLES-HINT"

// Detect chooses the variant this node's other agents use, as the
// iptables-wrapper of Kubernetes' images does: the variant whose mangle table
// holds kubelet's KUBE-IPTABLES-HINT chain; else the one with more rules in
// total (legacy only when it has more); else NFT. command runs the programs
// (nil: exec.CommandContext).
//
// Reading a legacy table makes the kernel create it in the namespace (and
// iptables-nft then warns "iptables-legacy tables present" on every
// listing), so the legacy variant is read only when the namespace already
// has legacy tables (/proc/net/ip_tables_names or ip6_tables_names, read
// through command, in the namespace it runs in).
func Detect(ctx context.Context, command CommandFunc) Variant {
	nft, legacy := &Exec{Variant: NFT, Command: command}, &Exec{Variant: Legacy, Command: command}
	candidates := []*Exec{nft}
	if legacyTables(ctx, nft) {
		candidates = append(candidates, legacy)
	}
	for _, v := range candidates {
		if out, err := v.Save(ctx, ipfamily.IPv4, "mangle"); err == nil && bytes.Contains(out, []byte(":"+HintChain+" ")) {
			return v.Variant
		}
	}
	if len(candidates) > 1 && rules(ctx, legacy) > rules(ctx, nft) {
		return Legacy
	}
	return NFT
}

// legacyTables reports whether the namespace e's commands run in has any
// x_tables (legacy) table of either family.
func legacyTables(ctx context.Context, e *Exec) bool {
	for _, f := range []string{"/proc/net/ip_tables_names", "/proc/net/ip6_tables_names"} {
		out, err := e.command(ctx, "cat", f).Output()
		if err == nil && len(bytes.TrimSpace(out)) > 0 {
			return true
		}
	}
	return false
}

// rules counts the rules of the variant's IPv4 and IPv6 nat and filter
// tables (0 when it cannot be read).
func rules(ctx context.Context, e *Exec) int {
	n := 0
	for _, f := range ipfamily.All {
		for _, t := range []string{"nat", "filter"} {
			if out, err := e.Save(ctx, f, t); err == nil {
				n += bytes.Count(out, []byte("\n-A "))
			}
		}
	}
	return n
}

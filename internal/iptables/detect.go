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
func Detect(ctx context.Context, command CommandFunc) Variant {
	nft, legacy := &Exec{Variant: NFT, Command: command}, &Exec{Variant: Legacy, Command: command}
	for _, v := range []*Exec{nft, legacy} {
		if out, err := v.Save(ctx, ipfamily.IPv4, "mangle"); err == nil && bytes.Contains(out, []byte(":"+HintChain+" ")) {
			return v.Variant
		}
	}
	if rules(ctx, legacy) > rules(ctx, nft) {
		return Legacy
	}
	return NFT
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

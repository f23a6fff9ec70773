package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/nft"
)

// target translates "-j NAME OPTIONS..." (or -g with goto).
func (tr *translator) target(gotoChain bool, name string, opts []string, p *ruleParse) ([]nft.Expr, error) {
	o := map[string]string{}
	for i := 0; i < len(opts); i++ {
		k := opts[i]
		if !strings.HasPrefix(k, "--") {
			return nil, fmt.Errorf("-j %s: unexpected %q", name, k)
		}
		if k == "--random-fully" {
			o[k] = ""
			continue
		}
		if i+1 >= len(opts) {
			return nil, fmt.Errorf("-j %s %s without a value", name, k)
		}
		o[k] = opts[i+1]
		i++
	}
	only := func(allowed ...string) error {
		for k := range o {
			if !slices.Contains(allowed, k) {
				return fmt.Errorf("-j %s %s: not translated", name, k)
			}
		}
		return nil
	}
	if gotoChain {
		if c := tr.table.Chains[name]; c == nil || ipt.IsBuiltin(tr.table.Name, name) || len(o) > 0 {
			return nil, fmt.Errorf("-g %s: not a chain of table %s", name, tr.table.Name)
		}
		return []nft.Expr{nft.GotoTo(name)}, nil
	}
	switch name {
	case "ACCEPT", "DROP", "RETURN":
		if err := only(); err != nil {
			return nil, err
		}
		k := map[string]nft.VerdictKind{"ACCEPT": nft.Accept, "DROP": nft.Drop, "RETURN": nft.Return}[name]
		return []nft.Expr{nft.Verdict{Kind: k}}, nil
	case "REJECT":
		if err := only("--reject-with"); err != nil {
			return nil, err
		}
		switch with := o["--reject-with"]; with {
		case "", "icmp-port-unreachable", "icmp6-port-unreachable":
			return []nft.Expr{nft.Reject{}}, nil
		case "tcp-reset":
			if p.proto != nft.ProtoTCP {
				return nil, fmt.Errorf("-j REJECT --reject-with tcp-reset without -p tcp")
			}
			return []nft.Expr{nft.Reject{TCPReset: true}}, nil
		default:
			return nil, fmt.Errorf("-j REJECT --reject-with %s: not translated", with)
		}
	case "DNAT":
		if err := only("--to-destination"); err != nil {
			return nil, err
		}
		to, err := dnatTarget(o["--to-destination"])
		if err != nil {
			return nil, fmt.Errorf("-j DNAT --to-destination %q: %w", o["--to-destination"], err)
		}
		if to.Port() != 0 && p.proto == 0 {
			return nil, fmt.Errorf("-j DNAT to a port without -p")
		}
		return []nft.Expr{nft.DNAT{To: to}}, nil
	case "MASQUERADE":
		if err := only("--random-fully"); err != nil {
			return nil, err
		}
		_, fully := o["--random-fully"]
		return []nft.Expr{nft.Masquerade{FullyRandom: fully}}, nil
	case "MARK":
		if len(o) != 1 {
			return nil, fmt.Errorf("-j MARK: want one of --or-mark, --xor-mark, --set-xmark")
		}
		for k, v := range o {
			val, mask, err := markValue(v)
			if err != nil {
				return nil, fmt.Errorf("-j MARK %s %s: %w", k, v, err)
			}
			hasMask := strings.Contains(v, "/")
			switch {
			case k == "--or-mark" && !hasMask:
				return []nft.Expr{nft.SetMark{Op: nft.MarkOr, Value: val}}, nil
			case k == "--xor-mark" && !hasMask:
				return []nft.Expr{nft.SetMark{Op: nft.MarkXor, Value: val}}, nil
			// --set-xmark V/M is mark = (mark & ^M) ^ V.
			case k == "--set-xmark" && hasMask && mask == val:
				return []nft.Expr{nft.SetMark{Op: nft.MarkOr, Value: val}}, nil
			case k == "--set-xmark" && hasMask && mask == 0:
				return []nft.Expr{nft.SetMark{Op: nft.MarkXor, Value: val}}, nil
			}
			return nil, fmt.Errorf("-j MARK %s %s: not translated (only or and xor of bits)", k, v)
		}
	}
	if c := tr.table.Chains[name]; c != nil && !ipt.IsBuiltin(tr.table.Name, name) {
		if err := only(); err != nil {
			return nil, err
		}
		return []nft.Expr{nft.JumpTo(name)}, nil
	}
	return nil, fmt.Errorf("target %s: not translated (and not a chain of table %s)", name, tr.table.Name)
}

// dnatTarget parses ADDR, ADDR:PORT or [ADDR6]:PORT.
func dnatTarget(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("want ADDR[:PORT] (no ranges)")
	}
	return netip.AddrPortFrom(a, 0), nil
}

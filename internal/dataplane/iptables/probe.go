package iptables

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
)

// extension is one iptables extension the plane's rules use: the kernel
// module that implements it and a rule that needs it.
type extension struct {
	table, module, rule string
}

// features are the extensions of the rendered rules (render.go) and of the
// jumps, with their kernel modules.
func extensions(f ipfamily.Family) []extension {
	reject := "ipt_REJECT"
	rejectRule := "-j REJECT --reject-with icmp-port-unreachable"
	if f == ipfamily.IPv6 {
		reject, rejectRule = "ip6t_REJECT", "-j REJECT --reject-with icmp6-port-unreachable"
	}
	return []extension{
		{TableNAT, "xt_comment", `-m comment --comment "svcnet probe" -j RETURN`},
		{TableNAT, "xt_mark", "-m mark --mark 0x4000/0x4000 -j RETURN"},
		{TableNAT, "xt_MARK", "-j MARK --or-mark 0x4000"},
		{TableNAT, "xt_statistic", "-m statistic --mode random --probability 0.5000000000 -j RETURN"},
		{TableNAT, "xt_recent", "-m recent --name svcnet-probe --mask " + mask(f) + " --rcheck --seconds 10800 --reap -j RETURN"},
		{TableNAT, "xt_tcpudp", "-p tcp -m tcp --dport 80 -j RETURN"},
		{TableNAT, "xt_sctp", "-p sctp -m sctp --dport 80 -j RETURN"},
		{TableNAT, "xt_addrtype", "-m addrtype --dst-type LOCAL -j RETURN"},
		{TableNAT, "xt_nat (DNAT)", "-p tcp -m tcp -j DNAT --to-destination " + dnatTo(f)},
		{TableNAT, "xt_MASQUERADE", "-j MASQUERADE --random-fully"},
		{TableFilter, "xt_conntrack", "-m conntrack --ctstate INVALID -j DROP"},
		{TableFilter, reject, rejectRule},
	}
}

func mask(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	}
	return "255.255.255.255"
}

func dnatTo(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "[fd00::1]:80"
	}
	return "10.0.0.1:80"
}

// probeChain is the scratch chain Probe creates and deletes.
func probeChain() string { return fmt.Sprintf("KUBE-SVCNET-PROBE-%d", os.Getpid()%100000) }

// Probe commits, per family, a scratch chain in the nat and filter tables
// holding a rule of every extension the plane uses, then deletes it. When
// the kernel refuses, it tries each extension alone to name the one
// missing, and returns an error wrapping dataplane.ErrNotSupported.
func (b *Backend) Probe(ctx context.Context) error {
	for _, f := range b.families {
		exts := extensions(f)
		if err := b.try(ctx, f, exts); err != nil {
			for _, ft := range exts {
				if one := b.try(ctx, f, []extension{ft}); one != nil {
					return dataplane.NotSupported(fmt.Errorf("%s: kernel lacks %s (%q): %w", f, ft.module, ft.rule, one))
				}
			}
			return fmt.Errorf("probe %s iptables: %w", f, err)
		}
	}
	return nil
}

// try commits the features in a scratch chain and deletes it again (also
// when the commit fails: a table the restore committed before the failing
// one keeps its chain).
func (b *Backend) try(ctx context.Context, f ipfamily.Family, fs []extension) error {
	chain := probeChain()
	var add, del strings.Builder
	for _, table := range []string{TableFilter, TableNAT} {
		var rules []string
		for _, ft := range fs {
			if ft.table == table {
				rules = append(rules, "-A "+chain+" "+ft.rule+"\n")
			}
		}
		if len(rules) == 0 {
			continue
		}
		add.WriteString("*" + table + "\n:" + chain + " - [0:0]\n" + strings.Join(rules, "") + "COMMIT\n")
		del.WriteString("*" + table + "\n:" + chain + " - [0:0]\n-X " + chain + "\nCOMMIT\n")
	}
	err := b.run.Restore(ctx, f, []byte(add.String()))
	b.removeProbe(ctx, f, chain, del.String())
	return err
}

// removeProbe deletes the scratch chain from whichever table has it.
func (b *Backend) removeProbe(ctx context.Context, f ipfamily.Family, chain, del string) {
	if b.run.Restore(ctx, f, []byte(del)) == nil {
		return
	}
	for _, table := range []string{TableFilter, TableNAT} {
		_ = b.run.Restore(ctx, f, []byte("*"+table+"\n:"+chain+" - [0:0]\n-X "+chain+"\nCOMMIT\n"))
	}
}

package iptables

import (
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/sim"
)

// TestTranslateGoldens: every golden restore input translates, rule for
// rule, each rule keeping its text and comment.
func TestTranslateGoldens(t *testing.T) {
	files, err := filepath.Glob("testdata/*.golden")
	if err != nil || len(files) == 0 {
		t.Fatalf("goldens: %v (%d)", err, len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			// Chain deletions (-X) of a partial restore are not rules.
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(l, "-X ") {
					lines = append(lines, l)
				}
			}
			tables, err := ipt.ParseSave([]byte(strings.Join(lines, "\n")))
			if err != nil {
				t.Fatal(err)
			}
			// A partial restore jumps to chains of unchanged ports, which
			// the kernel holds from the earlier full restore.
			for _, tb := range tables {
				for _, c := range tb.Chains {
					for _, r := range c.Rules {
						if j := ipt.JumpTarget(r); IsServiceChain(j) && tb.Chains[j] == nil {
							tb.Chains[j] = &ipt.Chain{Name: j, Policy: "-"}
						}
					}
				}
			}
			fam := ipfamily.IPv4
			if strings.HasSuffix(file, "-ip6.golden") {
				fam = ipfamily.IPv6
			}
			out, err := Translate(fam, tables)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(tables) {
				t.Fatalf("%d tables translated of %d", len(out), len(tables))
			}
			for _, nt := range out {
				it := tables[nt.Name]
				for name, c := range it.Chains {
					nc := nt.Chains[name]
					if nc == nil || len(nc.Rules) != len(c.Rules) {
						t.Fatalf("table %s chain %s: not translated rule for rule", nt.Name, name)
					}
					for i, r := range c.Rules {
						if nc.Rules[i].Source != "-A "+name+" "+r {
							t.Fatalf("table %s chain %s rule %d: source %q", nt.Name, name, i, nc.Rules[i].Source)
						}
						if w, _ := Words(r); slices.Contains(w, "--comment") && nc.Rules[i].Comment == "" {
							t.Fatalf("table %s chain %s rule %d: comment lost", nt.Name, name, i)
						}
					}
				}
			}
		})
	}
}

// TestTranslateRules: each match and target the translation knows, as the
// renderer writes it and as iptables-save prints it, and what it refuses.
func TestTranslateRules(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		spec string
		fam  ipfamily.Family
		want []nft.Expr
	}{
		{`-m comment --comment "a b" -m tcp -p tcp -d 10.96.0.20 --dport 80 -j KUBE-SVC-X`, ipfamily.IPv4,
			[]nft.Expr{nft.ProtoMatch{Proto: 6}, nft.Daddr(p("10.96.0.20/32")), nft.PortMatch{Field: nft.FieldDport, Port: 80}, nft.JumpTo("KUBE-SVC-X")}},
		{`-d 10.96.0.20/32 -p tcp -m comment --comment "a b" -m tcp --dport 80 -j KUBE-SVC-X`, ipfamily.IPv4,
			[]nft.Expr{nft.Daddr(p("10.96.0.20/32")), nft.ProtoMatch{Proto: 6}, nft.PortMatch{Field: nft.FieldDport, Port: 80}, nft.JumpTo("KUBE-SVC-X")}},
		{`! -s 192.168.0.0/16 -j KUBE-MARK-MASQ`, ipfamily.IPv4,
			[]nft.Expr{nft.AddrMatch{Field: nft.FieldSaddr, Neq: true, Prefix: p("192.168.0.0/16")}, nft.JumpTo("KUBE-MARK-MASQ")}},
		{`! -i cbr0 -j RETURN`, ipfamily.IPv4, []nft.Expr{nft.IifnameMatch{Name: "cbr0", Neq: true}, nft.Verdict{Kind: nft.Return}}},
		{`-i veth+ -j ACCEPT`, ipfamily.IPv4, []nft.Expr{nft.IifnameMatch{Name: "veth", Prefix: true}, nft.Verdict{Kind: nft.Accept}}},
		{`-m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`, ipfamily.IPv4, []nft.Expr{nft.FibLocal{Saddr: true}, nft.JumpTo("KUBE-MARK-MASQ")}},
		{`-m addrtype --dst-type LOCAL -j KUBE-MARK-MASQ`, ipfamily.IPv4, []nft.Expr{nft.FibLocal{}, nft.JumpTo("KUBE-MARK-MASQ")}},
		{`-m mark ! --mark 0x4000/0x4000 -j RETURN`, ipfamily.IPv4, []nft.Expr{nft.MarkMatch{Mask: 0x4000, Value: 0x4000, Neq: true}, nft.Verdict{Kind: nft.Return}}},
		{`-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`, ipfamily.IPv4, []nft.Expr{nft.CtStateMatch{States: nft.CtRelated | nft.CtEstablished}, nft.Verdict{Kind: nft.Accept}}},
		{`-m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-X`, ipfamily.IPv4, []nft.Expr{nft.Random{Mod: 3}, nft.JumpTo("KUBE-SEP-X")}},
		{`-m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-X`, ipfamily.IPv4, []nft.Expr{nft.Random{Mod: 3}, nft.JumpTo("KUBE-SEP-X")}},
		{`-m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-X`, ipfamily.IPv4, []nft.Expr{nft.Random{Mod: 2}, nft.JumpTo("KUBE-SEP-X")}},
		{`-m recent --name KUBE-SEP-X --rcheck --seconds 10800 --reap -j KUBE-SEP-X`, ipfamily.IPv4,
			[]nft.Expr{nft.Lookup{Set: "KUBE-SEP-X", Fields: []nft.Field{nft.FieldSaddr}}, nft.JumpTo("KUBE-SEP-X")}},
		{`-p tcp -m comment --comment x -m recent --set --name KUBE-SEP-X --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 192.168.2.10:8080`, ipfamily.IPv4,
			[]nft.Expr{nft.ProtoMatch{Proto: 6}, nft.Update{Set: "KUBE-SEP-X", Fields: []nft.Field{nft.FieldSaddr}}, nft.DNAT{To: netip.MustParseAddrPort("192.168.2.10:8080")}}},
		{`-m udp -p udp -j DNAT --to-destination [fd00::10]:53`, ipfamily.IPv6,
			[]nft.Expr{nft.ProtoMatch{Proto: 17}, nft.DNAT{To: netip.MustParseAddrPort("[fd00::10]:53")}}},
		{`-j MASQUERADE --random-fully`, ipfamily.IPv4, []nft.Expr{nft.Masquerade{FullyRandom: true}}},
		{`-j MARK --set-xmark 0x4000/0x4000`, ipfamily.IPv4, []nft.Expr{nft.SetMark{Op: nft.MarkOr, Value: 0x4000}}},
		{`-j MARK --set-xmark 0x4000/0x0`, ipfamily.IPv4, []nft.Expr{nft.SetMark{Op: nft.MarkXor, Value: 0x4000}}},
		{`-j MARK --or-mark 0x4000`, ipfamily.IPv4, []nft.Expr{nft.SetMark{Op: nft.MarkOr, Value: 0x4000}}},
		{`-j MARK --xor-mark 0x4000`, ipfamily.IPv4, []nft.Expr{nft.SetMark{Op: nft.MarkXor, Value: 0x4000}}},
		{`-j REJECT --reject-with icmp6-port-unreachable`, ipfamily.IPv6, []nft.Expr{nft.Reject{}}},
		{`-p tcp -j REJECT --reject-with tcp-reset`, ipfamily.IPv4, []nft.Expr{nft.ProtoMatch{Proto: 6}, nft.Reject{TCPReset: true}}},
		{`-m conntrack --ctstate INVALID -j DROP`, ipfamily.IPv4, []nft.Expr{nft.CtStateMatch{States: nft.CtInvalid}, nft.Verdict{Kind: nft.Drop}}},
		{`-m comment --comment "other traffic"`, ipfamily.IPv4, nil},
		{`-g KUBE-SEP-X`, ipfamily.IPv4, []nft.Expr{nft.GotoTo("KUBE-SEP-X")}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			r, err := translateOne(tc.fam, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if !exprsEqual(r.Exprs, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", r.Exprs, tc.want)
			}
		})
	}
	for _, tc := range []struct{ spec, err string }{
		{`-o eth0 -j ACCEPT`, "-o eth0: not translated"},
		{`-m multiport --dports 80,443 -j ACCEPT`, "match -m multiport: not translated"},
		{`-j SNAT --to-source 10.0.0.1`, "target SNAT: not translated"},
		{`-j LOG`, "target LOG: not translated"},
		{`-m statistic --mode random --probability 0.4 -j ACCEPT`, "not 1/n for a whole n"},
		{`-m statistic --mode nth --every 2 -j ACCEPT`, "--mode nth: not translated"},
		{`-m addrtype ! --dst-type LOCAL -j ACCEPT`, "! --dst-type LOCAL: not translated"},
		{`-j MARK --set-xmark 0x1/0xff`, "only or and xor of bits"},
		{`-p icmp -j ACCEPT`, "-p icmp: not translated"},
		{`-j REJECT --reject-with icmp-host-prohibited`, "icmp-host-prohibited: not translated"},
		{`-d 10.0.0.1 -j DNAT --to-destination 10.0.0.2:80`, "DNAT to a port without -p"},
		{`-m recent --name X --rcheck --seconds 60 --mask 255.255.255.0 --rsource -j ACCEPT`, "only the full mask"},
		{`-j NOWHERE`, "target NOWHERE: not translated (and not a chain of table nat)"},
		{`-d fd00::1 -j ACCEPT`, "not an address of family IPv4"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := translateOne(ipfamily.IPv4, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "chain KUBE-TEST rule 0 \"-A KUBE-TEST "+tc.spec+"\"") {
				t.Fatalf("error %v, want one naming the rule and %q", err, tc.err)
			}
		})
	}
}

// translateOne translates spec as the only rule of chain KUBE-TEST of a nat
// table that also has the chains it jumps to.
func translateOne(f ipfamily.Family, spec string) (*nft.Rule, error) {
	t := &ipt.Table{Name: TableNAT, Chains: map[string]*ipt.Chain{
		"KUBE-TEST":      {Name: "KUBE-TEST", Policy: "-", Rules: []string{spec}},
		"KUBE-SVC-X":     {Name: "KUBE-SVC-X", Policy: "-"},
		"KUBE-SEP-X":     {Name: "KUBE-SEP-X", Policy: "-"},
		"KUBE-MARK-MASQ": {Name: "KUBE-MARK-MASQ", Policy: "-"},
	}}
	out, err := Translate(f, map[string]*ipt.Table{TableNAT: t})
	if err != nil {
		return nil, err
	}
	return out[0].Chains["KUBE-TEST"].Rules[0], nil
}

func exprsEqual(a, b []nft.Expr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if nft.RenderExpr(ipfamily.IPv4, a[i]) != nft.RenderExpr(ipfamily.IPv4, b[i]) && nft.RenderExpr(ipfamily.IPv6, a[i]) != nft.RenderExpr(ipfamily.IPv6, b[i]) {
			return false
		}
	}
	return true
}

// TestTranslatedFeatureRows runs the packet simulator over the translation
// of the rendered feature table and checks that every packet of the
// feature rows meets the same fates, with the same probabilities, as the
// rule interpreter (TestSimulatedFeatureRows) finds in the rule text.
func TestTranslatedFeatureRows(t *testing.T) {
	local := ips("172.26.236.177", "192.168.1.1", "fd00:26:236::177", "fd00:192:168:1::1")
	for _, tc := range featureRows {
		t.Run(tc.name, func(t *testing.T) {
			dst := ap(tc.dst)
			fam := ipfamily.Of(dst.Addr())
			tables, err := Rules{Families: []ipfamily.Family{fam}}.Render(featureTable(t, testNode()))
			if err != nil {
				t.Fatal(err)
			}
			s := sim.New(nil, tables...)
			ctx := sim.Context{LocalAddrs: local, Path: sim.PathPrerouting, InIface: "eth0",
				EgressAddr: func(netip.Addr) netip.Addr { return local[0] }}
			if fam == ipfamily.IPv6 {
				ctx.EgressAddr = func(netip.Addr) netip.Addr { return local[2] }
			}
			if tc.output {
				ctx.Path, ctx.InIface = sim.PathOutput, ""
			}
			proto, _ := nft.ProtoNumber(tc.proto)
			outs, err := s.Enumerate(ctx, sim.Packet{Family: fam, Proto: proto, Src: tc.src, Dst: dst})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range outs {
				got = append(got, simFate(o.Result)+" "+o.Probability.RatString())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("fates\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(tc.want, "\n      "))
			}
			sum := new(big.Rat)
			for _, o := range outs {
				sum.Add(sum, o.Probability)
			}
			if sum.Cmp(big.NewRat(1, 1)) != 0 {
				t.Fatalf("probabilities sum to %s", sum.RatString())
			}
		})
	}
}

// simFate describes a simulator result as the interpreter's fates do.
func simFate(r sim.Result) string {
	switch r.Verdict {
	case sim.Dropped:
		return "drop"
	case sim.Rejected:
		return "reject"
	}
	fate, masq := "pass", false
	for _, s := range r.Trace {
		switch s.Action {
		case sim.ActDNAT:
			fate = "dnat " + s.After.Dst.String()
		case sim.ActMasquerade:
			masq = true
		}
	}
	if masq {
		fate += " masq"
	}
	return fate
}

// TestAdoptHandles: the translated table takes the kernel's table handle
// and, chain by chain in order, its rule handles (the kernel's policy
// marker, handle 0, and the translated policy rule take none); an empty
// built-in chain the kernel has not registered goes; a chain whose rules
// differ in number is an error naming it.
func TestAdoptHandles(t *testing.T) {
	tables := map[string]*ipt.Table{TableFilter: {Name: TableFilter, Chains: map[string]*ipt.Chain{
		"INPUT":          {Name: "INPUT", Policy: "ACCEPT"},
		"FORWARD":        {Name: "FORWARD", Policy: "DROP", Rules: []string{"-j KUBE-FORWARD", "-j ACCEPT"}},
		"KUBE-FORWARD":   {Name: "KUBE-FORWARD", Policy: "-", Rules: []string{"-m conntrack --ctstate INVALID -j DROP"}},
		"KUBE-SERVICES":  {Name: "KUBE-SERVICES", Policy: "-"},
		"KUBE-NODEPORTS": {Name: "KUBE-NODEPORTS", Policy: "-"},
	}}}
	tr := func() *nft.Table {
		out, err := Translate(ipfamily.IPv4, tables)
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	k := nft.NewTable(ipfamily.IPv4, TableFilter)
	k.Handle = 7
	k.Chains["FORWARD"] = &nft.Chain{Name: "FORWARD", Rules: []*nft.Rule{{Handle: 11}, {Handle: 12}, {Comment: "<unrecognised: policy drop>"}}}
	k.Chains["KUBE-FORWARD"] = &nft.Chain{Name: "KUBE-FORWARD", Rules: []*nft.Rule{{Handle: 20}}}
	k.Chains["KUBE-SERVICES"] = &nft.Chain{Name: "KUBE-SERVICES"}
	k.Chains["KUBE-NODEPORTS"] = &nft.Chain{Name: "KUBE-NODEPORTS"}
	got := tr()
	if err := AdoptHandles(got, k); err != nil {
		t.Fatal(err)
	}
	if got.Handle != 7 || got.Chains["INPUT"] != nil {
		t.Fatalf("table handle %d, INPUT %v: want 7 and no INPUT", got.Handle, got.Chains["INPUT"])
	}
	var hs []uint64
	for _, r := range append(got.Chains["FORWARD"].Rules, got.Chains["KUBE-FORWARD"].Rules...) {
		hs = append(hs, r.Handle)
	}
	if want := []uint64{11, 12, 0, 20}; !slices.Equal(hs, want) {
		t.Fatalf("handles %v, want %v", hs, want)
	}
	k.Chains["KUBE-FORWARD"].Rules = append(k.Chains["KUBE-FORWARD"].Rules, &nft.Rule{Handle: 21})
	err := AdoptHandles(tr(), k)
	if err == nil || !strings.Contains(err.Error(), "chain KUBE-FORWARD: 1 rules in iptables-save, 2 in the kernel's nf_tables table") {
		t.Fatalf("error %v, want the chain whose rules differ", err)
	}
}

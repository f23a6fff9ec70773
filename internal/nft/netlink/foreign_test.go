package netlink

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestReadForeignRules reads a table that someone else changed with nft(8):
// rules outside svcnet's vocabulary come back unrecognised, in place; rules
// nft writes the way svcnet would come back decompiled; sets svcnet cannot
// represent are flagged; a repair transaction restores the table.
func TestReadForeignRules(t *testing.T) {
	ns, c := openNS(t, "nlforeign")
	ctx := testCtx(t)
	if err := c.Apply(ctx, exampleTx()); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{
		"ip ttl 5 drop",                        // a header field svcnet never matches
		"oifname lo accept",                    // a meta key svcnet never loads
		"th sport 1 th dport 2 accept",         // nft merges the two loads
		"ip daddr { 1.2.3.4, 5.6.7.8 } accept", // an anonymous set
		"log prefix x",                         // an expression svcnet never uses
		"meta l4proto udp th dport 53 ip saddr 10.0.0.0/8 counter accept", // svcnet's own kind
	} {
		nftCmd(t, ns, append([]string{"add", "rule", "ip", "t", "services"}, strings.Fields(r)...)...)
	}
	nftCmd(t, ns, "add", "chain", "ip", "t", "in", "{ type filter hook input priority 0; policy drop; }")
	nftCmd(t, ns, "add", "set", "ip", "t", "ranges", "{ type ipv4_addr; flags interval; }")

	got, err := c.Read(ctx, ipfamily.IPv4, "t")
	if err != nil {
		t.Fatal(err)
	}
	rules := got.Chains["services"].Rules
	if len(rules) != 7 {
		t.Fatalf("services has %d rules, want 7:\n%s", len(rules), got.Render())
	}
	for i, want := range []string{"payload cmp immediate", "meta cmp immediate", "payload cmp immediate", "payload lookup immediate", "log"} {
		r := rules[1+i]
		if !IsUnrecognised(r) || !strings.Contains(r.Comment, want) {
			t.Errorf("rule %d: %+v, want unrecognised naming %q", 1+i, r, want)
		}
	}
	wantLast := nft.R(nft.ProtoMatch{Proto: nft.ProtoUDP}, nft.PortMatch{Field: nft.FieldDport, Port: 53},
		nft.Saddr(netip.MustParsePrefix("10.0.0.0/8")), nft.Counter{}, nft.Verdict{Kind: nft.Accept})
	if d := cmp.Diff(wantLast.Render(ipfamily.IPv4), rules[6].Render(ipfamily.IPv4)); d != "" || IsUnrecognised(rules[6]) {
		t.Errorf("nft's own rule (-want +got):\n%s", d)
	}
	if in := got.Chains["in"]; in == nil || len(in.Rules) != 1 || !strings.Contains(in.Rules[0].Comment, "policy drop") {
		t.Errorf("chain with policy drop: %+v", in)
	}
	if s := got.Sets["ranges"]; s == nil || !strings.HasPrefix(s.Comment, UnrecognisedPrefix) {
		t.Errorf("interval set: %+v", s)
	}
	for n := range got.Sets {
		if strings.HasPrefix(n, "__") {
			t.Errorf("anonymous set %s returned", n)
		}
	}

	// Repair: flush and refill the chain, delete what svcnet does not own.
	tx := nft.NewTx(ipfamily.IPv4, "t")
	tx.FlushChain("services")
	tx.AddRule("services", nft.R(nft.VMap{Fields: []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}, Map: "service-ips"}))
	tx.DeleteChain("in")
	tx.DeleteSet("ranges")
	if err := c.Apply(ctx, tx); err != nil {
		t.Fatal(err)
	}
	want, _ := applyFake(t, exampleTx()).Read(ctx, ipfamily.IPv4, "t")
	got, err = c.Read(ctx, ipfamily.IPv4, "t")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.Render(), got.Render()); d != "" {
		t.Errorf("after repair (-want +got):\n%s", d)
	}
}

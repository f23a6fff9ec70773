package nftrace

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
)

// chainRules returns the trimmed rule lines of each chain in `nft list`
// output, by chain name.
func chainRules(listing string) map[string][]string {
	out := map[string][]string{}
	chain := ""
	for _, line := range strings.Split(listing, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "chain "):
			chain = strings.Fields(line)[1]
			out[chain] = []string{}
		case line == "}" || line == "" || strings.HasPrefix(line, "type ") || strings.HasPrefix(line, "table "):
		case chain != "":
			out[chain] = append(out[chain], line)
		}
	}
	return out
}

// TestArmRulesAndClose arms both families and checks the tables, chains and
// rules as nft lists them; Close removes exactly them, and is idempotent.
func TestArmRulesAndClose(t *testing.T) {
	ns := netnstest.New(t, "trarm")
	nftLoad(t, ns, "table ip other { chain c { counter; }; }")
	a, err := Arm(ns, armTable, []Match{
		{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: netip.MustParsePrefix("10.0.0.0/8"),
			Dst: netip.MustParsePrefix("10.96.0.10/32"), Sport: 1234, Dport: 80},
		{Family: ipfamily.IPv6, Proto: nft.ProtoUDP, Dst: netip.MustParsePrefix("fd00:1::/64"), Dport: 53},
		{Family: ipfamily.IPv4},
		{Family: ipfamily.IPv4, Src: netip.MustParsePrefix("192.0.2.0/0"), Sport: 7},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want4 := []string{
		"ip saddr 10.0.0.0/8 ip daddr 10.96.0.10 tcp sport 1234 tcp dport 80 meta nftrace set 1",
		"meta nftrace set 1",
		"th sport 7 meta nftrace set 1",
	}
	want6 := []string{"ip6 daddr fd00:1::/64 udp dport 53 meta nftrace set 1"}
	for fam, want := range map[string][]string{"ip": want4, "ip6": want6} {
		listing := run(t, ns, "nft", "list", "table", fam, armTable)
		for _, chain := range []struct{ name, hook string }{{"prerouting", "prerouting"}, {"output", "output"}} {
			head := "type filter hook " + chain.hook + " priority raw; policy accept;"
			if !strings.Contains(listing, "chain "+chain.name+" {\n\t\t"+head) {
				t.Errorf("%s table: no chain %s with %q:\n%s", fam, chain.name, head, listing)
			}
			if got := chainRules(listing)[chain.name]; strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s %s rules:\n%s\nwant:\n%s", fam, chain.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	}
	if got := a.Families(); len(got) != 2 || got[0] != ipfamily.IPv4 || got[1] != ipfamily.IPv6 {
		t.Errorf("families %v, want [4 6]", got)
	}
	for _, c := range []struct {
		e    Event
		owns bool
	}{
		{Event{Table: armTable, Family: unix.NFPROTO_IPV4}, true},
		{Event{Table: armTable, Family: unix.NFPROTO_IPV6}, true},
		{Event{Table: armTable, Family: unix.NFPROTO_INET}, false},
		{Event{Table: "other", Family: unix.NFPROTO_IPV4}, false},
	} {
		if got := a.Owns(c.e); got != c.owns {
			t.Errorf("Owns(%s %s) = %v", c.e.Family, c.e.Table, got)
		}
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(run(t, ns, "nft", "list", "tables")); got != "table ip other" {
		t.Errorf("after Close: tables %q, want only table ip other", got)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseToleratesGoneTable closes an Armed whose table someone deleted.
func TestCloseToleratesGoneTable(t *testing.T) {
	ns := netnstest.New(t, "trgone")
	a, err := Arm(ns, armTable, []Match{{Family: ipfamily.IPv4, Dport: 80}, {Family: ipfamily.IPv6, Dport: 80}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, ns, "nft", "delete", "table", "ip", armTable)
	if err := a.Close(); err != nil {
		t.Fatalf("close with the ip table gone: %v", err)
	}
	if got := strings.TrimSpace(run(t, ns, "nft", "list", "tables")); got != "" {
		t.Errorf("after Close: tables %q, want none", got)
	}
}

// TestArmRefusesExistingTable: a table of the name in one of the families
// fails Arm as a whole, creates nothing, and leaves that table alone; the
// name is free in a family the matches do not use.
func TestArmRefusesExistingTable(t *testing.T) {
	ns := netnstest.New(t, "trexist")
	nftLoad(t, ns, "table ip6 "+armTable+" { chain mine { counter; }; }")
	before := run(t, ns, "nft", "list", "ruleset")
	_, err := Arm(ns, armTable, []Match{{Family: ipfamily.IPv4, Dport: 80}, {Family: ipfamily.IPv6, Dport: 80}})
	if !errors.Is(err, unix.EEXIST) {
		t.Fatalf("Arm over an existing ip6 table: %v, want EEXIST", err)
	}
	if after := run(t, ns, "nft", "list", "ruleset"); after != before {
		t.Fatalf("failed Arm changed the ruleset:\n%s\nwant:\n%s", after, before)
	}
	a, err := Arm(ns, armTable, []Match{{Family: ipfamily.IPv4, Dport: 80}})
	if err != nil {
		t.Fatalf("Arm ip only, next to someone's ip6 table: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if after := run(t, ns, "nft", "list", "ruleset"); after != before {
		t.Fatalf("Close touched someone else's table:\n%s\nwant:\n%s", after, before)
	}
}

// TestArmRejectsBadInput needs no kernel: input is checked before the
// namespace is used (a nil one here).
func TestArmRejectsBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		table   string
		matches []Match
		want    string
	}{
		"no name":       {"", []Match{{Family: ipfamily.IPv4}}, "invalid name"},
		"long name":     {strings.Repeat("x", 300), []Match{{Family: ipfamily.IPv4}}, "invalid name"},
		"no match":      {armTable, nil, "no match given"},
		"family":        {armTable, []Match{{Family: 5}}, "match 0: family 5 is neither IPv4 nor IPv6"},
		"prefix family": {armTable, []Match{{Family: ipfamily.IPv4}, {Family: ipfamily.IPv4, Dst: netip.MustParsePrefix("fd00::/64")}}, "match 1: destination fd00::/64 is not a ip prefix"},
		"mapped":        {armTable, []Match{{Family: ipfamily.IPv6, Src: netip.MustParsePrefix("::ffff:10.0.0.1/128")}}, "is not a ip6 prefix"},
		"no namespace":  {armTable, []Match{{Family: ipfamily.IPv4}}, "no network namespace given"},
	} {
		if _, err := Arm(nil, c.table, c.matches); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

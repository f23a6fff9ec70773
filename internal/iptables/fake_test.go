package iptables

import (
	"context"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// restoreInput is kube-proxy-shaped restore input, its rules written in
// iptables-save's canonical form (so that kernel read-back compares equal).
const restoreInput = `*filter
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d 10.96.0.9/32 -p tcp -m comment --comment "default/empty:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "default/web:http -> 10.0.0.1:8080" -j KUBE-SEP-BBBBBBBBBBBBBBBB
-A KUBE-SEP-BBBBBBBBBBBBBBBB -s 10.0.0.1/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.0.0.1:8080
-I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
COMMIT
`

// semantics are restore inputs applied one after the other to restoreInput,
// each with whether it must fail and, if it fails, that the state stays.
var semantics = []struct {
	name  string
	input string
	fail  string
	check func(t *testing.T, nat *Table)
}{
	{"declaring a chain flushes it; others are kept", "*nat\n:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]\nCOMMIT\n", "", func(t *testing.T, nat *Table) {
		if n := len(nat.Chains["KUBE-SVC-AAAAAAAAAAAAAAAA"].Rules); n != 0 {
			t.Errorf("declared chain kept %d rules", n)
		}
		if n := len(nat.Chains["KUBE-SEP-BBBBBBBBBBBBBBBB"].Rules); n != 2 {
			t.Errorf("undeclared chain has %d rules, want 2", n)
		}
		if n := len(nat.Chains["PREROUTING"].Rules); n != 1 {
			t.Errorf("PREROUTING has %d rules, want 1", n)
		}
	}},
	{"a jump to a missing chain fails the whole table", "*nat\n:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-MISSING\nCOMMIT\n", "KUBE-SVC-MISSING", nil},
	{"a referenced chain cannot be deleted", "*nat\n-X KUBE-SEP-BBBBBBBBBBBBBBBB\nCOMMIT\n", "-X KUBE-SEP-BBBBBBBBBBBBBBBB", nil},
	{"deleting a rule that is not there fails", "*nat\n-D KUBE-SERVICES -j KUBE-MARK-MASQ\nCOMMIT\n", "-D KUBE-SERVICES", nil},
	{"-D then -X removes a chain", "*nat\n:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]\n-X KUBE-SEP-BBBBBBBBBBBBBBBB\nCOMMIT\n", "", func(t *testing.T, nat *Table) {
		if nat.Chains["KUBE-SEP-BBBBBBBBBBBBBBBB"] != nil {
			t.Error("chain still there")
		}
	}},
	{"-I at a number inserts there, at the end too", "*nat\n-I KUBE-SERVICES 1 -m comment --comment first -j KUBE-MARK-MASQ\n-I KUBE-SERVICES 3 -m comment --comment last -j KUBE-MARK-MASQ\nCOMMIT\n", "", func(t *testing.T, nat *Table) {
		r := nat.Chains["KUBE-SERVICES"].Rules
		if len(r) != 3 || !strings.Contains(r[0], "first") || !strings.Contains(r[2], "last") {
			t.Errorf("KUBE-SERVICES = %q", r)
		}
	}},
	{"-D by number deletes that rule", "*nat\n-D KUBE-SERVICES 2\nCOMMIT\n", "", func(t *testing.T, nat *Table) {
		r := nat.Chains["KUBE-SERVICES"].Rules
		if len(r) != 2 || !strings.Contains(r[0], "first") || !strings.Contains(r[1], "last") {
			t.Errorf("KUBE-SERVICES = %q", r)
		}
	}},
	{"-D past the last rule fails", "*nat\n-D KUBE-SERVICES 1\n-D KUBE-SERVICES 2\nCOMMIT\n", "-D KUBE-SERVICES 2", nil},
	{"-I past the end fails", "*nat\n-I KUBE-SERVICES 4 -j KUBE-MARK-MASQ\nCOMMIT\n", "-I KUBE-SERVICES 4", nil},
}

func TestFakeRestoreSemantics(t *testing.T) {
	ctx := context.Background()
	k := NewFake()
	if err := k.Restore(ctx, ipfamily.IPv4, []byte(restoreInput)); err != nil {
		t.Fatal(err)
	}
	for _, s := range semantics {
		before, _ := k.Save(ctx, ipfamily.IPv4, "nat")
		err := k.Restore(ctx, ipfamily.IPv4, []byte(s.input))
		after, _ := k.Save(ctx, ipfamily.IPv4, "nat")
		if s.fail != "" {
			if err == nil || !strings.Contains(err.Error(), s.fail) {
				t.Errorf("%s: err = %v, want one naming %q", s.name, err, s.fail)
			}
			if string(after) != string(before) {
				t.Errorf("%s: a failed restore changed the table:\n%s", s.name, after)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		tables, err := ParseSave(after)
		if err != nil {
			t.Fatal(err)
		}
		s.check(t, tables["nat"])
	}
}

func TestSaveParseRoundTrip(t *testing.T) {
	ctx := context.Background()
	k := NewFake()
	if err := k.Restore(ctx, ipfamily.IPv6, []byte(restoreInput)); err != nil {
		t.Fatal(err)
	}
	out, err := k.Save(ctx, ipfamily.IPv6, "nat")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := ParseSave(out)
	if err != nil {
		t.Fatal(err)
	}
	if again := tables["nat"].Save(); string(again) != string(out) {
		t.Errorf("round trip differs:\n%s\nvs\n%s", again, out)
	}
	want := []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING", "KUBE-MARK-MASQ", "KUBE-SEP-BBBBBBBBBBBBBBBB", "KUBE-SERVICES", "KUBE-SVC-AAAAAAAAAAAAAAAA"}
	if got := tables["nat"].ChainNames(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("chains %v, want %v", got, want)
	}
	if empty, _ := k.Save(ctx, ipfamily.IPv4, "nat"); string(empty) != string(NewTable("nat").Save()) {
		t.Errorf("another family's table is not empty:\n%s", empty)
	}
	for _, bad := range []string{"-A X y\n", "*nat\n-A NOPE x\nCOMMIT\n", "*nat\n:X -\n"} {
		if _, err := ParseSave([]byte(bad)); err == nil {
			t.Errorf("ParseSave(%q) accepted it", bad)
		}
	}
}

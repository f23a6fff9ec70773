package iptables

import (
	"context"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// v6Input is restoreInput for IPv6: the same chains, IPv6 addresses and
// reject type.
var v6Input = strings.NewReplacer("10.96.0.9/32", "fd00:96::9/128", "10.96.0.1/32", "fd00:96::1/128",
	"10.0.0.1/32", "fd00:10::1/128", "10.0.0.1:8080", "[fd00:10::1]:8080", "icmp-port-unreachable", "icmp6-port-unreachable").Replace(restoreInput)

// TestKernelMatchesFake applies the same restore inputs to the kernel, in a
// throwaway namespace, through both variants and both families, and to the
// fake, and compares what iptables-save reads back with the fake's state
// after every step: the fake's semantics are the kernel's.
func TestKernelMatchesFake(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx := context.Background()
	for _, v := range []Variant{NFT, Legacy} {
		for _, f := range ipfamily.All {
			t.Run(string(v)+"/"+f.String(), func(t *testing.T) {
				ns := netnstest.New(t, "ipt")
				k := &Exec{Variant: v, Command: ns.CommandContext}
				fake := NewFake()
				input := restoreInput
				if f == ipfamily.IPv6 {
					input = v6Input
				}
				compare := func(step string) {
					t.Helper()
					for _, table := range []string{"nat", "filter"} {
						got, err := k.Save(ctx, f, table)
						if err != nil {
							t.Fatal(err)
						}
						kt, err := ParseSave(got)
						if err != nil {
							t.Fatalf("%s: parse %s: %v\n%s", step, table, err, got)
						}
						want, _ := fake.Save(ctx, f, table)
						if g := string(kt[table].Save()); g != string(want) {
							t.Errorf("%s: table %s: kernel\n%s\nfake\n%s", step, table, g, want)
						}
					}
				}
				for _, r := range []Runner{k, fake} {
					if err := r.Restore(ctx, f, []byte(input)); err != nil {
						t.Fatal(err)
					}
				}
				compare("initial")
				for _, s := range semantics {
					kerr := k.Restore(ctx, f, []byte(s.input))
					ferr := fake.Restore(ctx, f, []byte(s.input))
					if (kerr == nil) != (ferr == nil) || (kerr == nil) != (s.fail == "") {
						t.Fatalf("%s: kernel err %v, fake err %v", s.name, kerr, ferr)
					}
					compare(s.name)
				}
			})
		}
	}
}

// TestDetect: a fresh namespace is NFT; kubelet's hint chain in the legacy
// mangle table makes it Legacy; more legacy rules without a hint too.
func TestDetect(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx := context.Background()
	ns := netnstest.New(t, "iptd")
	if v := Detect(ctx, ns.CommandContext); v != NFT {
		t.Errorf("fresh namespace: %s, want nft", v)
	}
	if out, err := ns.Command("cat", "/proc/net/ip_tables_names").Output(); err != nil || len(out) > 0 {
		t.Errorf("Detect created legacy tables %q in a fresh namespace (%v)", out, err)
	}
	legacy := &Exec{Variant: Legacy, Command: ns.CommandContext}
	if err := legacy.Restore(ctx, ipfamily.IPv4, []byte("*nat\n:KUBE-A - [0:0]\n-A KUBE-A -j RETURN\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	if v := Detect(ctx, ns.CommandContext); v != Legacy {
		t.Errorf("legacy rules only: %s, want legacy", v)
	}
	ns2 := netnstest.New(t, "iptd2")
	nft := &Exec{Variant: NFT, Command: ns2.CommandContext}
	if err := nft.Restore(ctx, ipfamily.IPv4, []byte("*nat\n:KUBE-A - [0:0]\n-A KUBE-A -j RETURN\n-A KUBE-A -j RETURN\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	leg2 := &Exec{Variant: Legacy, Command: ns2.CommandContext}
	if err := leg2.Restore(ctx, ipfamily.IPv4, []byte("*mangle\n:"+HintChain+" - [0:0]\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	if v := Detect(ctx, ns2.CommandContext); v != Legacy {
		t.Errorf("hint in legacy, more rules in nft: %s, want legacy (the hint wins)", v)
	}
}

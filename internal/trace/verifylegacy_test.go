package trace

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestDNATOfFlow: the probe's connection is found by protocol, source
// address and original destination; its DNAT is the reply's source.
func TestDNATOfFlow(t *testing.T) {
	ap := netip.MustParseAddrPort
	flows := []conntrack.Flow{
		{Proto: nft.ProtoUDP, OrigSrc: ap("172.26.236.10:40000"), OrigDst: ap("172.26.236.177:30080"), ReplySrc: ap("192.168.9.9:80")},
		{Proto: nft.ProtoTCP, OrigSrc: ap("172.26.236.10:1"), OrigDst: ap("172.26.236.177:30081"), ReplySrc: ap("192.168.9.8:80")},
		{Proto: nft.ProtoTCP, OrigSrc: ap("172.26.236.10:40000"), OrigDst: ap("172.26.236.177:30080"), ReplySrc: ap("192.168.2.10:8080")},
	}
	pkt := Tuple{Proto: "tcp", Src: ap("172.26.236.10:40000"), Dst: ap("172.26.236.177:30080")}
	if ep, ok := dnatOfFlow(flows, pkt); !ok || ep != ap("192.168.2.10:8080") {
		t.Errorf("DNAT %s %v, want 192.168.2.10:8080", ep, ok)
	}
	// Not translated: the reply comes from the original destination.
	flows = append(flows[:2], conntrack.Flow{Proto: nft.ProtoTCP, OrigSrc: pkt.Src, OrigDst: pkt.Dst, ReplySrc: pkt.Dst})
	if ep, ok := dnatOfFlow(flows, pkt); ok {
		t.Errorf("DNAT %s of an untranslated flow", ep)
	}
}

// TestTablesDiffer: the plane's tables read back against the rendered
// ones, by rule text; other tables are not compared.
func TestTablesDiffer(t *testing.T) {
	table := func(name string, rules map[string][]string) *nft.Table {
		tb := nft.NewTable(ipfamily.IPv4, name)
		for c, rs := range rules {
			ch := &nft.Chain{Name: c}
			for _, r := range rs {
				ch.Rules = append(ch.Rules, &nft.Rule{Source: "-A " + c + " " + r})
			}
			tb.Chains[c] = ch
		}
		return tb
	}
	owns := func(n string) bool { return n == "nat" || n == "filter" }
	rendered := []*nft.Table{table("nat", map[string][]string{"KUBE-SERVICES": {"-j KUBE-NODEPORTS"}, "KUBE-MARK-MASQ": {"-j MARK --set-xmark 0x4000/0x4000"}})}
	same := []*nft.Table{table("nat", map[string][]string{"KUBE-SERVICES": {"-j KUBE-NODEPORTS"}, "KUBE-MARK-MASQ": {"-j MARK --set-xmark 0x4000/0x4000"}, "INPUT": nil}),
		table("svcnet-hostport", map[string][]string{"x": {"y"}})}
	if d := tablesDiffer("node1", same, rendered, owns); len(d) != 0 {
		t.Errorf("differences %v, want none", d)
	}
	other := []*nft.Table{table("nat", map[string][]string{"KUBE-SERVICES": {"-j KUBE-NODEPORTS", "-j DOCKER"}}), table("filter", nil)}
	want := []string{
		"node node1: table ip nat chain KUBE-MARK-MASQ is rendered but not in the kernel",
		`node node1: table ip nat chain KUBE-SERVICES: the kernel's rules differ from the rendered ones: rule 1 is "-A KUBE-SERVICES -j DOCKER" in the kernel, (none) rendered`,
		"node node1: table ip filter is in the kernel but not rendered",
	}
	if d := tablesDiffer("node1", other, rendered, owns); !slices.Equal(d, want) {
		t.Errorf("differences\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(want, "\n"))
	}
}

// TestReportUnchecked: a report with nodes checked only in part says so,
// and what was not checked.
func TestReportUnchecked(t *testing.T) {
	rep := &Report{Trace: &Trace{}, Probe: "connected", Unchecked: []string{"node node1: iptables-legacy: its rules are x_tables rules, which nftrace does not see; not checked: ..."}}
	var b bytes.Buffer
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"unchecked: node node1: iptables-legacy", "verify: the kernel agrees where it could be checked"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, b.String())
		}
	}
	if strings.Contains(b.String(), "the kernel took the same chains") {
		t.Errorf("report claims the whole path was checked:\n%s", b.String())
	}
}

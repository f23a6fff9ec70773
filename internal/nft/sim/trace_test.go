package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestTraceClusterIPFromOutside pins the whole trace of one packet: every
// hook, base chain, rule and rewrite, in order.
func TestTraceClusterIPFromOutside(t *testing.T) {
	a := fixtureAddrs(ipfamily.IPv4)
	s := New(nil, proxyTable(t, a))
	res, err := s.Run(a.nodeContext(PathPrerouting, nil), a.tcp(ap(a.client, 40000), ap(a.svcA, 80)))
	if err != nil {
		t.Fatal(err)
	}
	const want = `prerouting  hook: tcp 172.26.236.10:40000 → 10.96.0.50:80 ct new
prerouting  svcnet/filter-prerouting chain: type filter hook prerouting priority -110
prerouting  svcnet/filter-prerouting[0] jump firewall-check
prerouting  svcnet/firewall-check[0] no-match: ip daddr . meta l4proto . th dport vmap @firewall-ips: no element 10.96.0.50 . tcp . 80
prerouting  svcnet/firewall-check return filter-prerouting: end of chain
prerouting  svcnet/filter-prerouting policy: policy accept
prerouting  svcnet/nat-prerouting chain: type nat hook prerouting priority -100
prerouting  svcnet/nat-prerouting[0] jump services
prerouting  svcnet/services[0] goto service-a: 10.96.0.50 . tcp . 80 : goto service-a
prerouting  svcnet/service-a[0] jump mark-for-masquerade
prerouting  svcnet/mark-for-masquerade[0] set-mark: mark 0x00000000 → 0x00004000
prerouting  svcnet/mark-for-masquerade[0] continue: matched
prerouting  svcnet/mark-for-masquerade return service-a: end of chain
prerouting  svcnet/service-a[1] goto endpoint-a1
prerouting  svcnet/endpoint-a1[0] no-match: ip saddr 192.168.1.10: saddr is 172.26.236.10
prerouting  svcnet/endpoint-a1[1] dnat: daddr 10.96.0.50:80 → 192.168.1.10:8080
routing     route: 192.168.1.10 is not local: forward
forward     hook: tcp 172.26.236.10:40000 → 192.168.1.10:8080 mark 0x4000 ct new
forward     svcnet/filter-forward chain: type filter hook forward priority -110
forward     svcnet/filter-forward[0] jump service-endpoints-check
forward     svcnet/service-endpoints-check[0] no-match: ip daddr . meta l4proto . th dport vmap @no-endpoint-services: no element 192.168.1.10 . tcp . 8080
forward     svcnet/service-endpoints-check return filter-forward: end of chain
forward     svcnet/filter-forward policy: policy accept
postrouting hook: tcp 172.26.236.10:40000 → 192.168.1.10:8080 mark 0x4000 ct new
postrouting svcnet/nat-postrouting chain: type nat hook postrouting priority 100
postrouting svcnet/nat-postrouting[0] jump masquerading
postrouting svcnet/masquerading[0] no-match: meta mark & 0x00004000 == 0x00000000: mark is 0x00004000
postrouting svcnet/masquerading[1] set-mark: mark 0x00004000 → 0x00000000
postrouting svcnet/masquerading[1] continue: matched
postrouting svcnet/masquerading[2] masquerade: saddr 172.26.236.10:40000 → 192.168.1.1:40000 (fully-random: the kernel may pick another port)
`
	if d := cmp.Diff(want, renderTrace(res.Trace)); d != "" {
		t.Errorf("trace (-want +got):\n%s", d)
	}

	before := a.tcp(ap(a.client, 40000), ap(a.svcA, 80))
	before.CtState, before.Mark = nft.CtNew, 0x4000
	after := before
	after.Dst = a.epsA[0]
	wantDNAT := Step{
		Hook: HookPrerouting, Table: "svcnet", Chain: "endpoint-a1", Rule: 1,
		Text:   `meta l4proto tcp counter dnat to 192.168.1.10:8080 comment "endpoint 192.168.1.10:8080"`,
		Action: ActDNAT, Detail: "daddr 10.96.0.50:80 → 192.168.1.10:8080",
		Before: &before, After: &after,
	}
	var gotDNAT *Step
	for i := range res.Trace {
		if res.Trace[i].Action == ActDNAT {
			gotDNAT = &res.Trace[i]
		}
	}
	if d := cmp.Diff(&wantDNAT, gotDNAT, cmpOpts); d != "" {
		t.Errorf("dnat step (-want +got):\n%s", d)
	}
	for _, st := range res.Trace {
		if (st.Rule >= 0) != (st.Text != "") {
			t.Errorf("step %+v: a rule's step must carry the rule's text, others none", st)
		}
	}
}

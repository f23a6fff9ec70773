package iptables

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// TestChainNamesMatchKubeProxy checks the chain names against those in
// kube-proxy's own tests (kubernetes/kubernetes pkg/proxy/iptables/
// proxier_test.go, TestOverallIPTablesRules and TestParseIPTablesData):
// Service port ns1/svc1:p80/TCP has KUBE-SVC-XPGD46QRK7WJZT7O and its
// endpoint 10.180.0.1:80 KUBE-SEP-SXIVWICOYRO3J4NJ; ns2/svc2:p80 has
// KUBE-SVC-, KUBE-EXT- and KUBE-SVL-GNZBNJ2PO5MGZ6GT with endpoint
// 10.180.0.2:80 KUBE-SEP-RS4RBKLTHTF2IUXJ; ns5/svc5:p80 has
// KUBE-FW-NUKIZ6OKUXPJNT4C with endpoint 10.180.0.3:80
// KUBE-SEP-I77PXRDZVX7PMWMN; ns4/svc4:p80's endpoints 10.180.0.4:80 and
// 10.180.0.5:80 are KUBE-SEP-UKSFD7AGPMPPLUHC and KUBE-SEP-C6EBXVWJJZMIWKLZ.
func TestChainNamesMatchKubeProxy(t *testing.T) {
	port := func(ns, name string) *servicetable.ServicePort {
		return &servicetable.ServicePort{
			Name:     servicetable.PortName{Namespace: ns, Name: name, Port: "p80", Protocol: model.ProtocolTCP},
			Protocol: model.ProtocolTCP, Family: ipfamily.IPv4,
		}
	}
	sep := func(a string) servicetable.Endpoint { return servicetable.Endpoint{Addr: ip(a), Port: 80} }
	svc1, svc2, svc4, svc5 := port("ns1", "svc1"), port("ns2", "svc2"), port("ns4", "svc4"), port("ns5", "svc5")
	for _, c := range []struct{ got, want string }{
		{ClusterChain(svc1), "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{EndpointChain(svc1, sep("10.180.0.1")), "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		{ClusterChain(svc2), "KUBE-SVC-GNZBNJ2PO5MGZ6GT"},
		{ExternalChain(svc2), "KUBE-EXT-GNZBNJ2PO5MGZ6GT"},
		{LocalChain(svc2), "KUBE-SVL-GNZBNJ2PO5MGZ6GT"},
		{EndpointChain(svc2, sep("10.180.0.2")), "KUBE-SEP-RS4RBKLTHTF2IUXJ"},
		{FirewallChain(svc5), "KUBE-FW-NUKIZ6OKUXPJNT4C"},
		{EndpointChain(svc5, sep("10.180.0.3")), "KUBE-SEP-I77PXRDZVX7PMWMN"},
		{EndpointChain(svc4, sep("10.180.0.4")), "KUBE-SEP-UKSFD7AGPMPPLUHC"},
		{EndpointChain(svc4, sep("10.180.0.5")), "KUBE-SEP-C6EBXVWJJZMIWKLZ"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, kube-proxy names it %s", c.got, c.want)
		}
	}
	for _, name := range []string{ClusterChain(svc1), LocalChain(svc1), ExternalChain(svc1), FirewallChain(svc1), EndpointChain(svc1, sep("10.180.0.1"))} {
		if !IsServiceChain(name) {
			t.Errorf("IsServiceChain(%s) = false", name)
		}
	}
	if IsServiceChain(ChainServices) || IsServiceChain(ChainMarkMasq) {
		t.Error("a shared chain reads as a per-port chain")
	}
}

var probRE = regexp.MustCompile(`--probability (\S+) -j (\S+)$`)

// cascade returns the chance that a new connection entering the rules of a
// policy chain reaches each endpoint chain: rule i is tried only if every
// earlier rule missed, so P(i) = p_i * prod_{j<i} (1 - p_j), and a rule
// without a probability takes all that is left.
func cascade(t *testing.T, rules []string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	left := 1.0
	for _, r := range rules {
		if strings.Contains(r, "-m recent") || strings.Contains(r, "KUBE-MARK-MASQ") {
			continue
		}
		target := r[strings.LastIndex(r, "-j ")+3:]
		p := 1.0
		if m := probRE.FindStringSubmatch(r); m != nil {
			var err error
			if p, err = strconv.ParseFloat(m[1], 64); err != nil {
				t.Fatal(err)
			}
		}
		out[target] += left * p
		left *= 1 - p
	}
	if left != 0 {
		t.Fatalf("the cascade leaves %g unmatched", left)
	}
	return out
}

// TestProbabilitiesAreUniform renders Services of 1 to 40 endpoints and
// checks that the statistic cascade of each KUBE-SVC chain picks every
// endpoint with chance 1/n (kube-proxy's ten-decimal probabilities are
// off by at most 5e-11 each).
func TestProbabilitiesAreUniform(t *testing.T) {
	for n := 1; n <= 40; n++ {
		var eps []model.Endpoint
		for i := range n {
			eps = append(eps, ep("192.168.2."+strconv.Itoa(i+1), "node2", ready))
		}
		tbl := build(t, testNode(), []*model.Service{svc("web", "10.96.0.20")}, slice("web", eps...))
		rs := Render(tbl, ipfamily.IPv4)
		sp := tbl.Ports[0]
		chains := rs.Chains(TableNAT)
		got := cascade(t, chains[ClusterChain(sp)].Rules)
		if len(got) != n {
			t.Fatalf("n=%d: the cascade reaches %d endpoint chains", n, len(got))
		}
		for _, e := range sp.ClusterEndpoints {
			p := got[EndpointChain(sp, e)]
			if math.Abs(p-1/float64(n)) > 1e-9 {
				t.Errorf("n=%d: endpoint %s chosen with chance %.12f, want %.12f", n, e, p, 1/float64(n))
			}
		}
	}
}

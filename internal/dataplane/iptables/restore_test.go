package iptables

import (
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/goldentest"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// changeTables are a table before and after a change: default/web loses an
// endpoint, default/gone is deleted, default/same is untouched.
func changeTables(t *testing.T) (before, after *servicetable.Table) {
	same := svc("same", "10.96.0.41")
	sameSlice := slice("same", remote2())
	before = build(t, testNode(),
		[]*model.Service{svc("web", "10.96.0.40"), same, svc("gone", "10.96.0.42")},
		slice("web", local1(), remote2()), sameSlice, slice("gone", remote3()))
	after = build(t, testNode(),
		[]*model.Service{svc("web", "10.96.0.40"), same},
		slice("web", local1()), sameSlice)
	return before, after
}

// TestPartialRestore pins the partial restore of a change: the shared
// chains whole, the changed port's chains, the removal of the chains of the
// endpoint and Service that went, nothing of the untouched port.
func TestPartialRestore(t *testing.T) {
	before, after := changeTables(t)
	old, cur := Render(before, ipfamily.IPv4), Render(after, ipfamily.IPv4)
	stale := cur.Stale(old)
	gone := before.Ports[0]
	if gone.ID != "default/gone:http/tcp" {
		t.Fatalf("fixture order: %s", gone.ID)
	}
	wantStale := []string{ClusterChain(gone), EndpointChain(gone, gone.ClusterEndpoints[0])}
	web := before.Ports[2]
	wantStale = append(wantStale, EndpointChain(web, web.ClusterEndpoints[1]))
	slices.Sort(wantStale)
	if !slices.Equal(stale, wantStale) {
		t.Fatalf("stale chains %v, want %v", stale, wantStale)
	}
	changed := map[string]bool{"default/web:http/tcp": true, "default/gone:http/tcp": true}
	text := cur.Partial(changed, stale)
	goldentest.Check(t, "partial-ip.golden", text)
	same := after.Ports[0]
	if strings.Contains(text, ":"+ClusterChain(same)) {
		t.Error("the partial restore rewrites the untouched port's chain")
	}
	if !strings.Contains(text, "-m comment --comment \"default/same:http cluster IP\"") {
		t.Error("the partial restore drops the untouched port's dispatch rule")
	}
	if cur.Partial(nil, nil) == cur.Full() {
		t.Error("a partial restore with no change writes every port's chains")
	}
	all := map[string]bool{}
	for _, p := range cur.Ports {
		all[p.ID] = true
	}
	if cur.Partial(all, nil) != cur.Full() {
		t.Error("a partial restore of every port differs from the full one")
	}
}

// TestChainsKeyedByName checks Chains: every chain the restore declares is
// there under its name, with the rules the restore appends to it.
func TestChainsKeyedByName(t *testing.T) {
	rs := Render(featureTable(t, testNode()), ipfamily.IPv4)
	for _, table := range []string{TableFilter, TableNAT} {
		chains := rs.Chains(table)
		section := rs.Full()
		section = section[strings.Index(section, "*"+table+"\n"):]
		section = section[:strings.Index(section, "COMMIT\n")]
		declared := 0
		rules := map[string][]string{}
		for _, line := range strings.Split(section, "\n") {
			switch {
			case strings.HasPrefix(line, ":"):
				declared++
				name := strings.Fields(line[1:])[0]
				if chains[name] == nil {
					t.Errorf("%s: chain %s declared but not in Chains", table, name)
				}
			case strings.HasPrefix(line, "-A "):
				name, r, _ := strings.Cut(line[3:], " ")
				rules[name] = append(rules[name], r)
			}
		}
		if declared != len(chains) {
			t.Errorf("%s: %d chains declared, Chains has %d", table, declared, len(chains))
		}
		for name, c := range chains {
			if !slices.Equal(c.Rules, rules[name]) {
				t.Errorf("%s %s: Chains has %d rules, the restore %d", table, name, len(c.Rules), len(rules[name]))
			}
		}
	}
}

// TestFrontendListedOnce renders a Service whose external IP is also its LB
// IP: the table lists the address once, as an external IP, and so does the
// dispatch.
func TestFrontendListedOnce(t *testing.T) {
	s := svc("both", "10.96.0.50", loadBalancer(30090, model.TrafficPolicyCluster, "172.26.236.185", "172.26.236.0/24"), func(s *model.Service) {
		s.ExternalIPs = ips("172.26.236.185")
	})
	tbl := build(t, testNode(), []*model.Service{s}, slice("both", remote2()))
	rs := Render(tbl, ipfamily.IPv4)
	var dispatch []string
	for _, r := range rs.Chains(TableNAT)[ChainServices].Rules {
		if strings.Contains(r, "172.26.236.185") {
			dispatch = append(dispatch, r)
		}
	}
	if len(dispatch) != 1 || !strings.Contains(dispatch[0], "external IP") {
		t.Fatalf("dispatch of the shared address: %q", dispatch)
	}
	if c := rs.Chains(TableNAT)[FirewallChain(tbl.Ports[0])]; c != nil {
		t.Fatalf("a firewall chain no LB frontend uses: %v", c.Rules)
	}
}

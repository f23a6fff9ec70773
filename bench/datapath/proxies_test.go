package datapathbench

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/lab/cluster"
)

func TestParseProxies(t *testing.T) {
	got, err := parseProxies(strings.Join(proxyNames(), ","))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"svcnet", "svcnet-ebpf", "kube-proxy-nftables", "kube-proxy-iptables", "svcnet-iptables", "svcnet-userspace"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("every proxy (-want +got):\n%s", diff)
	}
	// allProxies' order, whatever the order given; no duplicates.
	got, err = parseProxies(" svcnet-userspace,kube-proxy-iptables, svcnet-iptables,svcnet-userspace")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kube-proxy-iptables", "svcnet-iptables", "svcnet-userspace"}, got); diff != "" {
		t.Errorf("some proxies (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "svcnet,", "kube-proxy-ipvs", "svcnet-nftables"} {
		if _, err := parseProxies(bad); err == nil || !strings.Contains(err.Error(), "want some of svcnet, svcnet-ebpf, kube-proxy-nftables") {
			t.Errorf("parseProxies(%q): err = %v, want one listing the proxies", bad, err)
		}
	}
	// Each proxy is the lab's proxy with svcnet proxy's data plane; beside
	// kube-proxy there is none (cluster.CheckDataPlane).
	for _, p := range allProxies {
		if err := cluster.CheckDataPlane("x", p.labProxy, p.dataPlane); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
	}
	for name, plane := range map[string]string{"svcnet": "", "svcnet-iptables": "iptables", "svcnet-userspace": "userspace"} {
		if p, _ := proxyNamed(name); p.labProxy != cluster.ProxySvcnet || p.dataPlane != plane {
			t.Errorf("%s: lab proxy %q data plane %q, want svcnet and %q", name, p.labProxy, p.dataPlane, plane)
		}
	}
}

func TestRunLimit(t *testing.T) {
	if got := runLimit(6); got != 36*time.Minute {
		t.Errorf("runLimit(6) = %s, want 36 minutes", got)
	}
	if got := runLimit(1); got != 18*time.Minute {
		t.Errorf("runLimit(1) = %s, want that of three (the lab and the 10k fillers alone)", got)
	}
	// The default run: 3 counts x 3 rounds x 5 proxies, 4 paths, 3 pairs,
	// 200ms loads: 540s of load, under half of 30 minutes.
	n := len(allProxies)
	if err := checkBudget(len(schedule(proxyNames(), 3, rounds)), len(allPaths), pairs, defaultDuration, runLimit(n)); err != nil {
		t.Errorf("default run of %d proxies: %v", n, err)
	}
}

// svcnet's iptables plane is judged against kube-proxy's iptables mode per
// figure as svcnet is against kube-proxy's nftables mode, each comparison
// a family of its own; the userspace plane's figures are printed relative
// to direct, with no target.
func TestReportPlanes(t *testing.T) {
	path := func(p string, dka, dnc, ska, snc float64, p99ms int) pathResult {
		pr := pathResult{path: p}
		for _, f := range []float64{1, 1.01, 0.99, 1.005, 0.995, 1} {
			pr.direct = append(pr.direct, fixedSample(dka, dnc, 100))
			pr.service = append(pr.service, fixedSample(ska*f, snc*f, p99ms))
		}
		return pr
	}
	c := countResult{services: 1000, apply: time.Second, programmed: 3 * time.Second, grownBy: proxySvcnetUserspace,
		proxies: []proxyResult{
			{proxy: cluster.ProxyKubeProxyIPTables, paths: []pathResult{path(pathClusterIPRemote, 1000, 500, 990, 490, 100), path(pathNodePort, 1000, 500, 900, 400, 100)}},
			// clusterip-remote: the same as kube-proxy's; nodeport: lower
			// in every pair, and a longer p99.
			{proxy: proxySvcnetIPTables, ready: []time.Duration{4 * time.Second},
				paths: []pathResult{path(pathClusterIPRemote, 1000, 500, 990, 490, 100), path(pathNodePort, 1000, 500, 800, 300, 120)}},
			{proxy: proxySvcnetUserspace, ready: []time.Duration{2 * time.Second},
				paths: []pathResult{path(pathClusterIPRemote, 1000, 500, 250, 100, 300), path(pathNodePort, 1000, 500, 200, 50, 400)}},
		}}
	got := report{duration: time.Second, rounds: 1, counts: []countResult{c}}.String()
	for _, want := range []string{
		"proxies kube-proxy-iptables, svcnet-iptables, svcnet-userspace take turns on the same lab",
		"\n  kube-proxy-iptables upstream kube-proxy --proxy-mode iptables\n  svcnet-iptables     svcnet proxy --data-plane iptables\n  svcnet-userspace    svcnet proxy --data-plane userspace:",
		"programmed on both nodes 3s after the apply started) by svcnet-userspace",
		"svcnet-iptables (ready 4s after a swap to it began, median of 1 swaps)",
		"svcnet-userspace (ready 2s after a swap to it began, median of 1 swaps)",
		"svcnet-iptables at least equal to kube-proxy-iptables on every figure",
		"worse or better only where Holm's procedure over all 8 figures rejects \"equal\" at a family-wise 5%, else equal",
		" 1000 Services clusterip-remote  keep-alive: met    equal  [",
		"] p=0.567 (0.990x vs 0.990x)   new connections: met    equal  [",
		"] p=0.567 (0.980x vs 0.980x)   connect p50: met    equal  [+0us,+0us] p=1.000 (+0us vs +0us over direct; 50000us vs 50000us)   connect p99: met    equal  [+0us,+0us] p=1.000 (+0us vs +0us over direct; 99000us vs 99000us)",
		" 1000 Services nodeport          keep-alive: MISSED worse  [",
		"] p=0.001 (0.800x vs 0.900x)   new connections: MISSED worse  [",
		"] p=0.001 (0.600x vs 0.800x)   connect p50: MISSED worse  [-10000us,-10000us] p=0.001 (+10000us vs +0us over direct; 60000us vs 50000us)   connect p99: MISSED worse  [-20000us,-20000us] p=0.001 (+20000us vs +0us over direct; 119000us vs 99000us)",
		"svcnet-iptables >= kube-proxy-iptables on every figure: MISSED by the noise (0 better, 4 equal, 4 worse of 8 figures); strictly 4 of 8",
		"\nsvcnet-userspace relative to direct, no target (median of the paired ratios and its 90% bootstrap interval; connect p50 and p99 over direct)\n" +
			" 1000 Services clusterip-remote  keep-alive 0.250x (0.249-0.251)   new connections 0.200x (0.199-0.201)   connect p50 +100000us   p99 +198000us over direct\n" +
			" 1000 Services nodeport          keep-alive 0.200x (0.199-0.201)   new connections 0.100x (0.100-0.101)   connect p50 +150000us   p99 +297000us over direct\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	// Neither svcnet nor kube-proxy nftables measured: no targets of svcnet
	// and no comparison of them.
	for _, not := range []string{"svcnet at least equal", "targets of svcnet (", "connect p99 growth"} {
		if strings.Contains(got, not) {
			t.Errorf("report has %q without svcnet's nftables plane:\n%s", not, got)
		}
	}

	// Without kube-proxy iptables, no comparison of the iptables plane;
	// without the userspace plane, no figures of it.
	c.proxies = c.proxies[1:2]
	got = report{duration: time.Second, rounds: 1, counts: []countResult{c}}.String()
	if strings.Contains(got, "at least equal") || strings.Contains(got, "relative to direct, no target") {
		t.Errorf("svcnet-iptables alone: report compares or lists the userspace plane:\n%s", got)
	}
}

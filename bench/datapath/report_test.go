package datapathbench

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/lab/cluster"
)

func TestQuantile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	tests := []struct {
		name string
		ds   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, .5, 0},
		{"one", ms(7), .99, 7 * time.Millisecond},
		{"p50 of 4 unsorted", ms(4, 1, 3, 2), .5, 2 * time.Millisecond},
		{"p99 of 100", ms(seq(100)...), .99, 99 * time.Millisecond},
		{"p50 of 100", ms(seq(100)...), .5, 50 * time.Millisecond},
		{"max", ms(5, 9, 1), 1, 9 * time.Millisecond},
		{"min", ms(5, 9, 1), 0, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tt.ds...)
			if got := quantile(tt.ds, tt.q); got != tt.want {
				t.Errorf("quantile(%v, %v) = %v, want %v", tt.ds, tt.q, got, tt.want)
			}
			if diff := cmp.Diff(in, tt.ds); diff != "" {
				t.Errorf("quantile modified its input (-before +after):\n%s", diff)
			}
		})
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
	if got := ratio(1, 0); got != 0 {
		t.Errorf("ratio(1, 0) = %v, want 0", got)
	}
}

func TestParseCounts(t *testing.T) {
	got, err := parseCounts("10000, 1,1000,1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 1000, 10000}, got); diff != "" {
		t.Errorf("parseCounts (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "0", "x", "1,,2", "-5", "999999"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q): no error", bad)
		}
	}
}

func TestFillers(t *testing.T) {
	objs := fillers(3, 5)
	if len(objs) != 4 {
		t.Fatalf("fillers(3, 5): %d objects, want 4 (a Service and a slice each)", len(objs))
	}
	seen := map[string]bool{}
	for i := range 20000 {
		for j := range 2 {
			a := fillerAddr(i, j)
			if !fillerEndpoints.Contains(a) || seen[a.String()] {
				t.Fatalf("fillerAddr(%d, %d) = %s: outside %s or repeated", i, j, a, fillerEndpoints)
			}
			seen[a.String()] = true
		}
	}
}

// fixedSample is a run with the given rates and connect probe times of 1..n
// ms (the connect times under load, 1000 ms each, must not count).
func fixedSample(ka, nc float64, n int) sample {
	s := sample{keepAlive: ka, newConn: nc}
	for i := 1; i <= n; i++ {
		s.probe = append(s.probe, time.Duration(i)*time.Millisecond)
		s.connect = append(s.connect, time.Second)
	}
	return s
}

func TestReport(t *testing.T) {
	mk := func(services int, p99ms int) countResult {
		return countResult{
			services: services, apply: 1500 * time.Millisecond, programmed: 2 * time.Second,
			proxies: []proxyResult{{proxy: cluster.ProxySvcnet, paths: []pathResult{
				{path: pathClusterIPRemote,
					direct:  []sample{fixedSample(1000, 500, 100), fixedSample(900, 400, 100), fixedSample(1100, 600, 100)},
					service: []sample{fixedSample(990, 490, p99ms), fixedSample(980, 480, p99ms), fixedSample(970, 470, p99ms)}},
				{path: pathLB,
					direct:  []sample{fixedSample(1000, 500, 100)},
					service: []sample{fixedSample(500, 200, 100)}},
			}}},
		}
	}
	r := report{duration: 3 * time.Second, rounds: 3, pairs: 1, pinning: "load generator on CPUs 0", counts: []countResult{mk(3, 100), mk(10000, 120)}}
	// Two runs of one side failed some connects: the table counts them
	// and names the first run's first error under it.
	lb := &r.counts[1].proxies[0].paths[1]
	lb.service = append(lb.service, sample{keepAlive: 500, newConn: 200, errors: 2, firstErr: errors.New("dial tcp 10.0.0.1:80: i/o timeout")},
		sample{keepAlive: 500, newConn: 200, errors: 1, firstErr: errors.New("later")})
	got := r.String()
	if want := "loadbalancer Service: 3 errors, the first: dial tcp 10.0.0.1:80: i/o timeout\n"; !strings.Contains(got, want) || strings.Count(got, "errors, the first") != 1 {
		t.Errorf("report does not name the errors once as %q:\n%s", want, got)
	}
	for _, want := range []string{
		"3 rounds of 1 pairs each; a pair loads direct and Service in turns of 25ms, 3s a side per load, 8 connections/workers",
		"one client's back-to-back connects with no other load, sides alternating (1.5s a side per pair)",
		"CPUs: load generator on CPUs 0",
		"3 Services (fillers applied in 1.5s, programmed on both nodes 2s after the apply started)",
		// direct medians 1000 and 500; service medians 980 and 480; the
		// pairs' ka ratios 0.990, 1.089, 0.882 and nc ratios 0.980, 1.200,
		// 0.783: medians 0.990 and 0.980 (not the ratios of the medians).
		"clusterip-remote       1000       980 0.990x        500       480 0.980x",
		// with the bootstrap interval of each median over its 3 pairs.
		"    3 Services clusterip-remote  keep-alive >= 0.97x direct: met    (0.990x, 0.882-1.089)   new connections >= 0.95x direct: met    (0.980x, 0.783-1.200)",
		// p99 of 1..100 ms is 99 ms; of 1..120 ms is 119 ms.
		// the direct p99 stayed at 99 ms: the growth is the Service path's.
		"connect p99 clusterip-remote  with 10000 Services within 10% of with 3: MISSED (119000us vs 99000us, 1.202x; direct 99000us vs 99000us, 1.000x; Service/direct growth 1.202x)",
		"connect p99 loadbalancer      with 10000 Services within 10% of with 3: met",
		// Every count's pairs together: the 6 pair ratios 0.990, 1.089,
		// 0.882 twice over.
		"Service/direct over every count together (2 counts x 3 pairs; median and 90% bootstrap interval; for information)",
		"svcnet              clusterip-remote  keep-alive 0.990x (0.882-1.089)   new connections 0.980x (0.783-1.200)   6 pairs",
		"svcnet              loadbalancer      keep-alive 0.500x (0.500-0.500)   new connections 0.400x (0.400-0.400)   2 pairs",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Services loadbalancer") {
		t.Errorf("report gives the loadbalancer path ratio targets:\n%s", got)
	}
	one := report{duration: time.Second, rounds: 1, counts: []countResult{mk(3, 100)}}
	if !strings.Contains(one.String(), "not measured (one count only)") || strings.Contains(one.String(), "every count together") {
		t.Errorf("one count: report does not say p99 growth was not measured:\n%s", one.String())
	}
}

// A proxy whose slots ran while the machine was slower, both sides of every
// pair alike, adds no latency over direct: its connect figures are equal to
// the other proxy's, though its pooled quantiles are longer (seen at 10k
// Services: one proxy's slots at 104-108us direct, the other's at 110-112us,
// each pair's Service 15us under its direct for both).
func TestReportLatencyOverDirect(t *testing.T) {
	slow := func(s sample, by time.Duration) sample {
		s.probe = slices.Clone(s.probe)
		for i := range s.probe {
			s.probe[i] += by
		}
		return s
	}
	path := func(by time.Duration) pathResult {
		pr := pathResult{path: pathLB}
		for range 6 {
			pr.direct = append(pr.direct, slow(fixedSample(1000, 500, 100), by))
			pr.service = append(pr.service, slow(fixedSample(1000, 500, 100), by))
		}
		return pr
	}
	c := countResult{services: 10000, proxies: []proxyResult{
		{proxy: cluster.ProxySvcnet, paths: []pathResult{path(8 * time.Millisecond)}},
		{proxy: cluster.ProxyKubeProxyNFTables, paths: []pathResult{path(0)}},
	}}
	got := report{duration: time.Second, rounds: 1, counts: []countResult{c}}.String()
	for _, want := range []string{
		"connect p50: met    equal  [+0us,+0us] p=1.000 (+0us vs +0us over direct; 58000us vs 50000us)",
		"connect p99: met    equal  [+0us,+0us] p=1.000 (+0us vs +0us over direct; 107000us vs 99000us)",
		"svcnet >= kube-proxy-nftables on every figure: met by the noise (0 better, 4 equal, 0 worse of 4 figures)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// With kube-proxy measured too, each proxy gets its table, svcnet's targets
// stay svcnet's, and "svcnet >= kube-proxy nftables" is judged per figure:
// ratios to direct at least kube-proxy's, connect p50 and p99 at most
// kube-proxy's.
func TestReportAgainstKubeProxy(t *testing.T) {
	// Six pairs, the Service's rates spread by +-1% around the given ones.
	path := func(p string, dka, dnc, ska, snc float64, p99ms int) pathResult {
		pr := pathResult{path: p}
		for _, f := range []float64{1, 1.01, 0.99, 1.005, 0.995, 1} {
			pr.direct = append(pr.direct, fixedSample(dka, dnc, 100))
			pr.service = append(pr.service, fixedSample(ska*f, snc*f, p99ms))
		}
		return pr
	}
	c := countResult{services: 1000, apply: time.Second, programmed: 3 * time.Second, grownBy: cluster.ProxyKubeProxyIPTables,
		proxies: []proxyResult{
			{proxy: cluster.ProxySvcnet, ready: []time.Duration{time.Second, 3 * time.Second},
				paths: []pathResult{path(pathClusterIPRemote, 1000, 500, 990, 490, 100), path(pathNodePort, 1000, 500, 900, 400, 100)}},
			{proxy: cluster.ProxyKubeProxyNFTables, ready: []time.Duration{2 * time.Second},
				// Lower direct figures: the same Service figures are higher ratios.
				paths: []pathResult{path(pathClusterIPRemote, 1000, 500, 980, 480, 100), path(pathNodePort, 800, 400, 900, 400, 90)}},
			{proxy: cluster.ProxyKubeProxyIPTables, paths: []pathResult{path(pathClusterIPRemote, 1000, 500, 500, 250, 300), path(pathNodePort, 1000, 500, 500, 250, 300)}},
		}}
	got := report{duration: time.Second, rounds: 1, counts: []countResult{c}}.String()
	for _, want := range []string{
		"proxies svcnet, kube-proxy-nftables, kube-proxy-iptables take turns on the same lab",
		"1000 Services (fillers applied in 1s, programmed on both nodes 3s after the apply started) by kube-proxy-iptables",
		"svcnet (ready 2s after a swap to it began, median of 2 swaps)",
		"kube-proxy-nftables (ready 2s after a swap to it began, median of 1 swaps)",
		"\nkube-proxy-iptables\npath ",
		// svcnet's own targets, from its table only.
		" 1000 Services clusterip-remote  keep-alive >= 0.97x direct: met    (0.990x, 0.985-0.995)",
		" 1000 Services nodeport          keep-alive >= 0.97x direct: MISSED (0.900x, 0.895-0.905)",
		"svcnet at least equal to kube-proxy-nftables on every figure",
		"worse or better only where Holm's procedure over all 8 figures rejects \"equal\" at a family-wise 5%, else equal",
		// clusterip-remote: 0.990x against 0.980x, and 0.980x against
		// 0.960x, with the same 1% spread: above in most pairs, so better
		// even over all 6 figures; the p99s are the same: equal.
		" 1000 Services clusterip-remote  keep-alive: met    better [+0.003,+0.017] p=0.996 (0.990x vs 0.980x)   new connections: met    better [+0.013,+0.027] p=1.000 (0.980x vs 0.960x)   connect p50: met    equal  [+0us,+0us] p=1.000 (+0us vs +0us over direct; 50000us vs 50000us)   connect p99: met    equal  [+0us,+0us] p=1.000 (+0us vs +0us over direct; 99000us vs 99000us)",
		// nodeport: kube-proxy's ratios are higher (1.125x, 1.000x) and its
		// p99 shorter, in every pair: the smallest p-value of 6+6 runs,
		// 1/924, under Holm's 5%/6 and so on.
		" 1000 Services nodeport          keep-alive: MISSED worse  [",
		"] p=0.001 (0.900x vs 1.125x)   new connections: MISSED worse  [",
		"] p=0.001 (0.800x vs 1.000x)   connect p50: MISSED worse  [-5000us,-5000us] p=0.001 (+0us vs -5000us over direct; 50000us vs 45000us)   connect p99: MISSED worse  [-10000us,-10000us] p=0.001 (+0us vs -10000us over direct; 99000us vs 90000us)",
		"svcnet >= kube-proxy-nftables on every figure: MISSED by the noise (2 better, 2 equal, 4 worse of 8 figures); strictly 4 of 8; intervals wholly below zero: 4 (about 0.4 expected between equal proxies)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}

	// All met.
	c.proxies = c.proxies[:1]
	c.proxies = append(c.proxies, proxyResult{proxy: cluster.ProxyKubeProxyNFTables,
		paths: []pathResult{path(pathClusterIPRemote, 1000, 500, 900, 400, 200), path(pathNodePort, 1000, 500, 800, 300, 200)}})
	got = report{duration: time.Second, rounds: 1, counts: []countResult{c}}.String()
	if !strings.Contains(got, "svcnet >= kube-proxy-nftables on every figure: met by the noise (8 better, 0 equal, 0 worse of 8 figures); strictly 8 of 8; intervals wholly below zero: 0") {
		t.Errorf("all figures better: report does not say met:\n%s", got)
	}

	// Without kube-proxy nftables, no comparison.
	c.proxies = c.proxies[:1]
	if got := (report{duration: time.Second, rounds: 1, counts: []countResult{c}}).String(); strings.Contains(got, "at least equal") {
		t.Errorf("svcnet alone: report compares with kube-proxy:\n%s", got)
	}
}

func TestSchedule(t *testing.T) {
	sl := schedule([]string{"a", "b", "c"}, 2, 2)
	var got []string
	for _, s := range sl {
		got = append(got, fmt.Sprintf("%d/%d/%s", s.count, s.round, s.proxy))
	}
	want := []string{
		"0/1/a", "0/1/b", "0/1/c", "0/2/c", "0/2/b", "0/2/a",
		"1/1/a", "1/1/b", "1/1/c", "1/2/c", "1/2/b", "1/2/a",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schedule (-want +got):\n%s", diff)
	}
	// a b c | c b a | a b c | c b a: 2 swaps per round, none between rounds.
	if n := swaps(sl); n != 8 {
		t.Errorf("swaps = %d, want 8", n)
	}
	// Each proxy's mean position within a count is the same: the serpentine
	// order balances a linear drift.
	pos := map[string]int{}
	for i, s := range sl[:6] {
		pos[s.proxy] += i
	}
	if pos["a"] != pos["b"] || pos["b"] != pos["c"] {
		t.Errorf("positions within a count %v: not balanced", pos)
	}
}

func TestCheckBudget(t *testing.T) {
	// The default run: 3 counts x 3 rounds x 3 proxies, 4 paths, 3 pairs,
	// 200ms loads: 324s of load, under half of 15 minutes.
	if err := checkBudget(27, 4, pairs, defaultDuration, 15*time.Minute); err != nil {
		t.Errorf("default run: %v", err)
	}
	// 3s loads would be 4860s: refused, naming the bound.
	if err := checkBudget(27, 4, pairs, 3*time.Second, 15*time.Minute); err == nil || !strings.Contains(err.Error(), "15m0s") {
		t.Errorf("3s runs: err = %v, want a refusal naming the bound", err)
	}
}

// Groups apart give the smallest p-value the split count allows on their
// side and 1 on the other, ties included; the same groups give the same
// values; pooled groups over 20 are sampled (seeded), not enumerated.
func TestRankSumP(t *testing.T) {
	lo, hi := []float64{1, 2, 3}, []float64{4, 5, 6}
	if l, h := rankSumP(lo, hi); l != 1.0/20 || h != 1 {
		t.Errorf("rankSumP(low, high) = %v, %v; want 1/20 (the 20 splits of 6 into 3+3; only the measured one is as low), 1", l, h)
	}
	if l, h := rankSumP(hi, lo); l != 1 || h != 1.0/20 {
		t.Errorf("rankSumP(high, low) = %v, %v; want 1, 1/20", l, h)
	}
	if l, h := rankSumP([]float64{99, 99, 99}, []float64{198, 198, 198}); l != 1.0/20 || h != 1 {
		t.Errorf("rankSumP(tied low, tied high) = %v, %v; want 1/20, 1", l, h)
	}
	if got, want := ranks([]float64{5, 1, 5, 3}), []float64{3.5, 1, 3.5, 2}; !slices.Equal(got, want) {
		t.Errorf("ranks = %v, want %v", got, want)
	}
	same := []float64{1, 2, 3, 4, 5, 6}
	if l, h := rankSumP(same, same); l < 0.5 || h < 0.5 {
		t.Errorf("rankSumP(same, same) = %v, %v; want both >= 0.5", l, h)
	}
	if l, h := rankSumP(nil, same); l != 1 || h != 1 {
		t.Errorf("rankSumP(none, ...) = %v, %v; want 1, 1", l, h)
	}
	var big, bigHi []float64
	for i := range 11 {
		big, bigHi = append(big, float64(i)), append(bigHi, float64(100+i))
	}
	l1, h1 := rankSumP(big, bigHi)
	l2, h2 := rankSumP(big, bigHi)
	if l1 != l2 || h1 != h2 || l1 > 0.001 || h1 != 1 {
		t.Errorf("22 pooled runs: %v, %v then %v, %v; want one tiny low p-value and high 1", l1, h1, l2, h2)
	}
}

// splitCounts counts by rank sum what enumerating every split counts: the
// two agree on random groups of every size up to permutationExact pooled
// runs, with ties.
func TestSplitCountsEqualsEnumeration(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 2 + r.IntN(permutationExact-1)
		k := 1 + r.IntN(n-1)
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(r.IntN(n)) // ties likely
		}
		rk := ranks(xs)
		var w float64
		for _, x := range rk[:k] {
			w += x
		}
		var le, ge, all int64
		for mask := uint32(1)<<k - 1; mask < 1<<n; {
			var wi float64
			for m := mask; m != 0; m &= m - 1 {
				wi += rk[bits.TrailingZeros32(m)]
			}
			all++
			if wi <= w+1e-9 {
				le++
			}
			if wi >= w-1e-9 {
				ge++
			}
			c := mask & -mask
			next := mask + c
			mask = (((next ^ mask) >> 2) / c) | next
		}
		gle, gge, gall := splitCounts(rk, k, w)
		if gle != le || gge != ge || gall != all {
			t.Fatalf("ranks %v, group of %d: splitCounts = %d, %d of %d, enumeration %d, %d of %d", rk, k, gle, gge, gall, le, ge, all)
		}
	}
}

func TestHolm(t *testing.T) {
	for _, c := range []struct {
		ps   []float64
		want []bool
	}{
		// Thresholds 0.05/4, /3, /2, /1: the second smallest, 0.02, is over
		// 0.0167, which stops the procedure.
		{[]float64{0.3, 0.001, 0.04, 0.02}, []bool{false, true, false, false}},
		{[]float64{0.04, 0.01, 0.02, 0.012}, []bool{true, true, true, true}},
		{[]float64{0.02}, []bool{true}},
		{nil, []bool{}},
	} {
		if got := holm(c.ps, 0.05); !slices.Equal(got, c.want) {
			t.Errorf("holm(%v) = %v, want %v", c.ps, got, c.want)
		}
	}
}

// The comparison's calibration, simulated: runs of 48 figures (the default
// run's) whose two proxies' 9 runs each (3 rounds x 3 pairs) come from one
// distribution (pair ratios around 1.0, 3% spread, as the turns give).
// Judged one figure at a time at 5% a side, most runs would show a "worse"
// figure; by verdicts, about one run in twenty (familyAlpha) may. A figure
// really 10% worse is still found in most runs.
func TestVerdictsCalibration(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	group := func(mean float64) []float64 {
		out := make([]float64, rounds*pairs)
		for i := range out {
			out[i] = mean + 0.03*r.NormFloat64()
		}
		return out
	}
	const runs, figures = 100, 48
	falseRuns, aloneRuns, found := 0, 0, 0
	for range runs {
		var cs []comparison
		alone := false
		for range figures {
			a, b := group(1.0), group(1.0)
			low, high := rankSumP(a, b)
			cs = append(cs, comparison{pWorse: low, pBetter: high})
			if low <= 0.05 {
				alone = true
			}
		}
		if slices.Contains(verdicts(cs), "worse") {
			falseRuns++
		}
		if alone {
			aloneRuns++
		}
		// The same run with figure 0 really 10% worse.
		a, b := group(0.90), group(1.0)
		low, high := rankSumP(a, b)
		cs[0] = comparison{pWorse: low, pBetter: high}
		if verdicts(cs)[0] == "worse" {
			found++
		}
	}
	if falseRuns > runs/10 {
		t.Errorf("equal proxies: %d of %d runs show a worse figure, want about %.0f%%", falseRuns, runs, familyAlpha*100)
	}
	if aloneRuns < runs/2 {
		t.Errorf("equal proxies judged a figure at a time: only %d of %d runs show a p <= 0.05 (the reason for Holm)", aloneRuns, runs)
	}
	if found < runs/2 {
		t.Errorf("a figure 10%% worse found in %d of %d runs, want most", found, runs)
	}
	t.Logf("equal proxies: %d of %d runs with a worse figure (a figure at a time: %d); 10%% worse found in %d", falseRuns, runs, aloneRuns, found)
}

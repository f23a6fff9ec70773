package datapathbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/lab/cluster"
)

// Targets of the data path, as ratios to direct pod traffic: svcnet must stay
// this close to the physical limit.
const (
	targetKeepAlive = 0.97 // keep-alive requests/s through ClusterIP and NodePort
	targetNewConn   = 0.95 // new connections/s through ClusterIP and NodePort
	targetP99Growth = 1.10 // connect p99 at the largest count / at the smallest
)

// pathResult is one path at one Service count: the direct reference's runs and
// the Service's, paired by round.
type pathResult struct {
	path    string
	direct  []sample
	service []sample
}

// figures are one side's medians over its runs; connect quantiles are over all
// its runs' connect probes together.
type figures struct {
	keepAlive, newConn float64
	p50, p99           time.Duration
	errors             int
	firstErr           error // of the first run that had errors
}

func summarize(ss []sample) figures {
	var f figures
	var ka, nc []float64
	var lat []time.Duration
	for _, s := range ss {
		ka, nc = append(ka, s.keepAlive), append(nc, s.newConn)
		lat = append(lat, s.probe...)
		f.errors += s.errors
		if f.firstErr == nil {
			f.firstErr = s.firstErr
		}
	}
	f.keepAlive, f.newConn = median(ka), median(nc)
	f.p50, f.p99 = quantile(lat, .5), quantile(lat, .99)
	return f
}

// ratios are a path's Service figures relative to direct: the median, over
// the pairs of runs (direct[i], service[i]), of each pair's ratio. A pair's
// two runs are seconds apart, so the machine's slower drift cancels in each
// ratio, and the median discards a run that a burst of other work hit.
type ratios struct{ keepAlive, newConn float64 }

func (p pathResult) ratios() ratios {
	ka, nc := p.pairRatios()
	return ratios{keepAlive: median(ka), newConn: median(nc)}
}

// pairRatios are each pair's Service/direct ratios, keep-alive and new
// connections.
func (p pathResult) pairRatios() (ka, nc []float64) {
	for i := range min(len(p.direct), len(p.service)) {
		d, s := p.direct[i], p.service[i]
		ka = append(ka, ratio(s.keepAlive, d.keepAlive))
		nc = append(nc, ratio(s.newConn, d.newConn))
	}
	return ka, nc
}

// pairExcess is, for each pair of runs with connect probes on both sides,
// the Service's connect q-quantile minus the direct one's, in microseconds:
// the latency the Service path adds. Like the ratios it cancels the
// machine's drift between slots, which moves both sides of a pair alike: at
// 10k Services one slot's direct p50 was 104us and another's 112us, for the
// same proxy and path, while each pair's Service-minus-direct stayed within
// a microsecond or two.
func (p pathResult) pairExcess(q float64) []float64 {
	var out []float64
	for i := range min(len(p.direct), len(p.service)) {
		d, s := p.direct[i], p.service[i]
		if len(d.probe) > 0 && len(s.probe) > 0 {
			out = append(out, float64(quantile(s.probe, q)-quantile(d.probe, q))/float64(time.Microsecond))
		}
	}
	return out
}

// familyAlpha is the family-wise level of the comparison with kube-proxy:
// the chance that two equal proxies show any figure "worse" (or any
// "better"), over all the figures of a run together.
const familyAlpha = 0.05

// comparison is one figure of two proxies a and b: the bootstrap interval
// of the difference of their medians (a minus b, flipped where lower is
// better, so positive is better for a), and the one-sided rank-sum
// p-values (rankSumP) of a being worse and of a being better.
type comparison struct {
	lo, hi          float64
	pWorse, pBetter float64
}

func compare(a, b []float64, lowerBetter bool) comparison {
	lo, hi := diffCI(a, b)
	low, high := rankSumP(a, b)
	if lowerBetter {
		return comparison{lo: 0 - hi, hi: 0 - lo, pWorse: high, pBetter: low} // 0-x, not -x: no "-0" in the report
	}
	return comparison{lo: lo, hi: hi, pWorse: low, pBetter: high}
}

// verdicts judges a run's comparisons together: a figure is "worse" when
// Holm's procedure over every figure's p-value of being worse rejects
// "equal" at familyAlpha, "better" likewise, else "equal". Judging each
// figure alone at 5% a side would call about one figure in twenty "worse"
// between two equal proxies: 2.4 of 48, and at least one in 91% of runs.
func verdicts(cs []comparison) []string {
	pw, pb := make([]float64, len(cs)), make([]float64, len(cs))
	for i, c := range cs {
		pw[i], pb[i] = c.pWorse, c.pBetter
	}
	worse, better := holm(pw, familyAlpha), holm(pb, familyAlpha)
	out := make([]string, len(cs))
	for i := range cs {
		switch {
		case worse[i]:
			out[i] = "worse"
		case better[i]:
			out[i] = "better"
		default:
			out[i] = "equal"
		}
	}
	return out
}

// proxyResult is one proxy at one Service count.
type proxyResult struct {
	proxy string
	// ready are the swaps to this proxy: from the start of the swap until
	// every path and the probe answered.
	ready []time.Duration
	paths []pathResult
}

// countResult is everything measured at one Service count.
type countResult struct {
	services   int           // Services in the cluster while measured
	apply      time.Duration // applying the fillers through lab.Apply
	programmed time.Duration // from the start of the apply until both nodes answered the probe
	grownBy    string        // the proxy that ran (and programmed the fillers) meanwhile
	proxies    []proxyResult
}

// proxy returns the result of the named proxy, or nil.
func (c countResult) proxy(name string) *proxyResult {
	for i := range c.proxies {
		if c.proxies[i].proxy == name {
			return &c.proxies[i]
		}
	}
	return nil
}

// targeted reports whether the path's ratios have targets (ClusterIP and
// NodePort; the LoadBalancer path is shown for information).
func targeted(path string) bool { return path != pathLB }

// report is the benchmark's result.
type report struct {
	duration time.Duration
	rounds   int
	pairs    int    // pairs of runs per path in each slot
	pinning  string // how load generator and servers were placed on CPUs
	counts   []countResult
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fus", float64(d)/float64(time.Microsecond)) }

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func (r report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Service data paths vs direct pod traffic: %d rounds of %d pairs each; a pair loads direct and Service in turns of %s, %s a side per load, %d connections/workers\n",
		r.rounds, r.pairs, turnLen, r.duration, workers)
	b.WriteString("figures: medians over the pairs' sides; ratio: median over the pairs of each pair's Service/direct ratio;\n")
	fmt.Fprintf(&b, "connect p50/p99: one client's back-to-back connects with no other load, sides alternating (%s a side per pair), over all pairs\n", r.duration/2)
	if r.pinning != "" {
		b.WriteString("CPUs: " + r.pinning + "\n")
	}
	fmt.Fprintf(&b, "proxies %s take turns on the same lab (kube control plane, same pods and Services), in serpentine order per round\n", strings.Join(r.proxies(), ", "))
	for _, name := range r.proxies() {
		if p, ok := proxyNamed(name); ok {
			fmt.Fprintf(&b, "  %-19s %s\n", name, p.about)
		}
	}
	fmt.Fprintf(&b, "direct reference: pod cli (node1) -> pod IP of srv-remote (node2), or of srv-local (node1) for clusterip-local;\n")
	fmt.Fprintf(&b, "for nodeport and loadbalancer the lab's client (from a second address) -> pod IP of srv-remote, routed via node1\n")
	fmt.Fprintf(&b, "as the NodePort path is; measured in turns with the Service, with the same proxy's rules installed\n")
	for _, c := range r.counts {
		fmt.Fprintf(&b, "\n%d Services (fillers applied in %s, programmed on both nodes %s after the apply started)",
			c.services, c.apply.Round(time.Millisecond), c.programmed.Round(time.Millisecond))
		if c.grownBy != "" {
			fmt.Fprintf(&b, " by %s", c.grownBy)
		}
		b.WriteString("\n")
		for _, pr := range c.proxies {
			writeProxyTable(&b, pr)
		}
	}
	r.writeTargets(&b)
	r.writePooled(&b)
	r.writeComparison(&b, cluster.ProxySvcnet, cluster.ProxyKubeProxyNFTables)
	r.writeEBPFTargets(&b)
	r.writeComparison(&b, proxySvcnetEBPF, cluster.ProxyKubeProxyNFTables)
	r.writeComparison(&b, proxySvcnetEBPF, cluster.ProxySvcnet)
	r.writeComparison(&b, proxySvcnetIPTables, cluster.ProxyKubeProxyIPTables)
	r.writeToDirect(&b, proxySvcnetUserspace)
	return b.String()
}

// writePooled writes each proxy's Service/direct ratios per path over the
// pairs of every count together, with their bootstrap intervals: the
// Service count changes only a connection's first packet (the rule lookup),
// so for keep-alive this is the path's cost with three times the pairs of a
// count. For information; the targets are per count. Nothing for one count.
func (r report) writePooled(b *strings.Builder) {
	if len(r.counts) < 2 {
		return
	}
	fmt.Fprintf(b, "\nService/direct over every count together (%d counts x %d pairs; median and %.0f%% bootstrap interval; for information)\n",
		len(r.counts), r.rounds*r.pairs, bootstrapLevel*100)
	for _, name := range r.proxies() {
		var paths []string
		kas, ncs := map[string][]float64{}, map[string][]float64{}
		for _, c := range r.counts {
			pr := c.proxy(name)
			if pr == nil {
				continue
			}
			for _, p := range pr.paths {
				if !slices.Contains(paths, p.path) {
					paths = append(paths, p.path)
				}
				ka, nc := p.pairRatios()
				kas[p.path], ncs[p.path] = append(kas[p.path], ka...), append(ncs[p.path], nc...)
			}
		}
		for _, p := range paths {
			kaLo, kaHi := medianCI(kas[p])
			ncLo, ncHi := medianCI(ncs[p])
			fmt.Fprintf(b, "%-19s %-17s keep-alive %.3fx (%.3f-%.3f)   new connections %.3fx (%.3f-%.3f)   %d pairs\n",
				name, p, median(kas[p]), kaLo, kaHi, median(ncs[p]), ncLo, ncHi, len(kas[p]))
		}
	}
}

// proxies lists the proxies measured, in the order of the first count.
func (r report) proxies() []string {
	var out []string
	if len(r.counts) > 0 {
		for _, p := range r.counts[0].proxies {
			out = append(out, p.proxy)
		}
	}
	return out
}

func writeProxyTable(b *strings.Builder, pr proxyResult) {
	fmt.Fprintf(b, "%s", pr.proxy)
	if len(pr.ready) > 0 {
		ms := make([]float64, len(pr.ready))
		for i, d := range pr.ready {
			ms[i] = float64(d)
		}
		fmt.Fprintf(b, " (ready %s after a swap to it began, median of %d swaps)", time.Duration(median(ms)).Round(time.Millisecond), len(pr.ready))
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "%-17s %9s %9s %6s  %9s %9s %6s  %15s %15s %6s\n",
		"path", "ka dir/s", "ka svc/s", "ratio", "nc dir/s", "nc svc/s", "ratio", "p50 dir/svc", "p99 dir/svc", "errors")
	var failed []string
	for _, p := range pr.paths {
		d, s, r := summarize(p.direct), summarize(p.service), p.ratios()
		fmt.Fprintf(b, "%-17s %9.0f %9.0f %5.3fx  %9.0f %9.0f %5.3fx  %15s %15s %6d\n",
			p.path, d.keepAlive, s.keepAlive, r.keepAlive,
			d.newConn, s.newConn, r.newConn,
			us(d.p50)+"/"+us(s.p50), us(d.p99)+"/"+us(s.p99), d.errors+s.errors)
		for _, x := range []struct {
			side string
			f    figures
		}{{"direct", d}, {"Service", s}} {
			if x.f.errors > 0 {
				failed = append(failed, fmt.Sprintf("  %s %s: %d errors, the first: %v\n", p.path, x.side, x.f.errors, x.f.firstErr))
			}
		}
	}
	// A path's errors are named under the table, so a count is never
	// without its cause.
	for _, l := range failed {
		b.WriteString(l)
	}
}

// writeTargets writes svcnet's own targets: ratios to direct, and connect p99
// growth with the Service count. Nothing when svcnet was not measured.
func (r report) writeTargets(b *strings.Builder) {
	if !slices.Contains(r.proxies(), cluster.ProxySvcnet) {
		return
	}
	fmt.Fprintf(b, "\ntargets of %s (the median of the paired ratios, and its %.0f%% bootstrap interval)\n", cluster.ProxySvcnet, bootstrapLevel*100)
	for _, c := range r.counts {
		pr := c.proxy(cluster.ProxySvcnet)
		if pr == nil {
			continue
		}
		for _, p := range pr.paths {
			if !targeted(p.path) {
				continue
			}
			kas, ncs := p.pairRatios()
			ka, nc := median(kas), median(ncs)
			kaLo, kaHi := medianCI(kas)
			ncLo, ncHi := medianCI(ncs)
			fmt.Fprintf(b, "%5d Services %-17s keep-alive >= %.2fx direct: %-6s (%.3fx, %.3f-%.3f)   new connections >= %.2fx direct: %-6s (%.3fx, %.3f-%.3f)\n",
				c.services, p.path, targetKeepAlive, metOrMissed(ka >= targetKeepAlive), ka, kaLo, kaHi,
				targetNewConn, metOrMissed(nc >= targetNewConn), nc, ncLo, ncHi)
		}
	}
	if len(r.counts) < 2 {
		b.WriteString("connect p99 growth with Service count: not measured (one count only)\n")
		return
	}
	lo, hi := r.counts[0].proxy(cluster.ProxySvcnet), r.counts[len(r.counts)-1].proxy(cluster.ProxySvcnet)
	if lo == nil || hi == nil {
		return
	}
	for i, p := range hi.paths {
		if i >= len(lo.paths) {
			break
		}
		a, z := summarize(lo.paths[i].service).p99, summarize(p.service).p99
		g := ratio(float64(z), float64(a))
		// The direct reference's own growth over the same hours: a tail that
		// grew on the direct path too is the machine's, not the rules'.
		da, dz := summarize(lo.paths[i].direct).p99, summarize(p.direct).p99
		dg := ratio(float64(dz), float64(da))
		fmt.Fprintf(b, "connect p99 %-17s with %d Services within %.0f%% of with %d: %-6s (%s vs %s, %.3fx; direct %s vs %s, %.3fx; Service/direct growth %.3fx)\n",
			p.path, r.counts[len(r.counts)-1].services, (targetP99Growth-1)*100, r.counts[0].services, metOrMissed(g <= targetP99Growth), us(z), us(a), g,
			us(dz), us(da), dg, ratio(g, dg))
	}
}

// writeComparison writes the target "a at least equal to b on every figure",
// per count and path: keep-alive and new-connection ratios to direct, and
// connect p50 and p99 over direct (pairExcess: each pair's Service quantile
// minus its direct one, so the slots' drift cancels as in the ratios; the
// pooled quantiles are printed beside). Each figure is judged strictly (a's
// median ratio at least b's, a's median excess at most b's) and by the noise: its 90%
// bootstrap interval of the difference, its one-sided rank-sum p-value, and
// the verdict of verdicts (better, equal or worse at a family-wise 5% over
// all figures).
// The target is met when no figure is worse by the noise; the strict count
// and the figures whose interval lies below zero are printed too. Nothing
// when either proxy was not measured.
func (r report) writeComparison(b *strings.Builder, a, ref string) {
	if !slices.Contains(r.proxies(), a) || !slices.Contains(r.proxies(), ref) {
		return
	}
	type figure struct {
		name       string
		strict     bool
		c          comparison
		unit       string // "%+.3f" for ratios, "%+.0fus" for latencies
		valA, valB string
		more       string // after the values, inside the parentheses
	}
	type row struct {
		services int
		path     string
		figs     []figure
	}
	var rows []row
	var cs []comparison
	for _, c := range r.counts {
		pa, pb := c.proxy(a), c.proxy(ref)
		if pa == nil || pb == nil {
			continue
		}
		for i, p := range pa.paths {
			if i >= len(pb.paths) {
				break
			}
			q := pb.paths[i]
			kaA, ncA := p.pairRatios()
			kaB, ncB := q.pairRatios()
			sa, sb := summarize(p.service), summarize(q.service)
			latency := func(name string, q50 float64, va, vb time.Duration) figure {
				ea, eb := p.pairExcess(q50), q.pairExcess(q50)
				return figure{name, median(ea) <= median(eb), compare(ea, eb, true), "%+.0fus",
					fmt.Sprintf("%+.0fus", median(ea)), fmt.Sprintf("%+.0fus", median(eb)), fmt.Sprintf(" over direct; %s vs %s", us(va), us(vb))}
			}
			rw := row{services: c.services, path: p.path, figs: []figure{
				{"keep-alive", median(kaA) >= median(kaB), compare(kaA, kaB, false), "%+.3f", fmt.Sprintf("%.3fx", median(kaA)), fmt.Sprintf("%.3fx", median(kaB)), ""},
				{"new connections", median(ncA) >= median(ncB), compare(ncA, ncB, false), "%+.3f", fmt.Sprintf("%.3fx", median(ncA)), fmt.Sprintf("%.3fx", median(ncB)), ""},
				latency("connect p50", .5, sa.p50, sb.p50),
				latency("connect p99", .99, sa.p99, sb.p99),
			}}
			for _, f := range rw.figs {
				cs = append(cs, f.c)
			}
			rows = append(rows, rw)
		}
	}
	vs := verdicts(cs)
	fmt.Fprintf(b, "\n%s at least equal to %s on every figure: ratios to direct at least as high, connect p50 and p99 over direct at most as long\n", a, ref)
	fmt.Fprintf(b, "(each pair's Service p50 or p99 minus its direct one: the latency the Service path adds; the pooled p50s and p99s follow them);\n")
	fmt.Fprintf(b, "each figure strictly (medians), and by the noise: the %.0f%% bootstrap interval of the difference of the medians (of the paired\n", bootstrapLevel*100)
	fmt.Fprintf(b, "ratios and excesses; positive is better for %s), the rank-sum permutation p-value of %s being worse, and the verdict:\n", a, a)
	fmt.Fprintf(b, "worse or better only where Holm's procedure over all %d figures rejects \"equal\" at a family-wise %.0f%%, else equal\n", len(cs), familyAlpha*100)
	strict, below := 0, 0
	tally := map[string]int{}
	k := 0
	for _, rw := range rows {
		fmt.Fprintf(b, "%5d Services %-17s", rw.services, rw.path)
		for j, f := range rw.figs {
			v := vs[k]
			k++
			tally[v]++
			if f.strict {
				strict++
			}
			if f.c.hi < 0 {
				below++
			}
			sep := "   "
			if j == 0 {
				sep = " "
			}
			span := fmt.Sprintf("["+f.unit+","+f.unit+"]", f.c.lo, f.c.hi)
			fmt.Fprintf(b, "%s%s: %-6s %-6s %s p=%.3f (%s vs %s%s)", sep, f.name, metOrMissed(f.strict), v, span, f.c.pWorse, f.valA, f.valB, f.more)
		}
		b.WriteString("\n")
	}
	all := len(cs)
	fmt.Fprintf(b, "%s >= %s on every figure: %s by the noise (%d better, %d equal, %d worse of %d figures); strictly %d of %d; intervals wholly below zero: %d (about %.1f expected between equal proxies)\n",
		a, ref, metOrMissed(all > 0 && tally["worse"] == 0), tally["better"], tally["equal"], tally["worse"], all, strict, all, below, float64(all)*(1-bootstrapLevel)/2)
}

// writeToDirect writes a proxy's figures relative to direct per count and
// path, for a proxy with no target (the userspace plane: every byte crosses
// user space twice, so its ratios are expected far below 1): keep-alive and
// new-connection ratios with the 90% bootstrap interval of their medians,
// and connect p50 and p99 over direct (the medians of the pairs' excess, as
// the comparisons use). Nothing when the proxy was not measured.
func (r report) writeToDirect(b *strings.Builder, name string) {
	if !slices.Contains(r.proxies(), name) {
		return
	}
	fmt.Fprintf(b, "\n%s relative to direct, no target (median of the paired ratios and its %.0f%% bootstrap interval; connect p50 and p99 over direct)\n",
		name, bootstrapLevel*100)
	for _, c := range r.counts {
		pr := c.proxy(name)
		if pr == nil {
			continue
		}
		for _, p := range pr.paths {
			kas, ncs := p.pairRatios()
			kaLo, kaHi := medianCI(kas)
			ncLo, ncHi := medianCI(ncs)
			fmt.Fprintf(b, "%5d Services %-17s keep-alive %.3fx (%.3f-%.3f)   new connections %.3fx (%.3f-%.3f)   connect p50 %+.0fus   p99 %+.0fus over direct\n",
				c.services, p.path, median(kas), kaLo, kaHi, median(ncs), ncLo, ncHi, median(p.pairExcess(.5)), median(p.pairExcess(.99)))
		}
	}
}

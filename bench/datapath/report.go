package datapathbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/lab"
)

// Targets of the data-path issue, as ratios to direct pod traffic.
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
}

func summarize(ss []sample) figures {
	var f figures
	var ka, nc []float64
	var lat []time.Duration
	for _, s := range ss {
		ka, nc = append(ka, s.keepAlive), append(nc, s.newConn)
		lat = append(lat, s.probe...)
		f.errors += s.errors
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
	var ka, nc []float64
	for i := range min(len(p.direct), len(p.service)) {
		d, s := p.direct[i], p.service[i]
		ka = append(ka, ratio(s.keepAlive, d.keepAlive))
		nc = append(nc, ratio(s.newConn, d.newConn))
	}
	return ratios{keepAlive: median(ka), newConn: median(nc)}
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
	fmt.Fprintf(&b, "Service data paths vs direct pod traffic: %d rounds of %d pairs of runs (direct, Service) each, %s per load, %d connections/workers\n",
		r.rounds, r.pairs, r.duration, workers)
	b.WriteString("figures: medians over the runs; ratio: median over the pairs of each pair's Service/direct ratio;\n")
	fmt.Fprintf(&b, "connect p50/p99: one client's back-to-back connects with no other load (%s per run), over all runs\n", r.duration/2)
	if r.pinning != "" {
		b.WriteString("CPUs: " + r.pinning + "\n")
	}
	fmt.Fprintf(&b, "proxies %s take turns on the same lab (kube control plane, same pods and Services), in serpentine order per round\n", strings.Join(r.proxies(), ", "))
	fmt.Fprintf(&b, "direct reference: pod cli (node1) -> pod IP of srv-remote (node2), or of srv-local (node1) for clusterip-local;\n")
	fmt.Fprintf(&b, "for nodeport and loadbalancer the lab's client (from a second address) -> pod IP of srv-remote, routed via node1\n")
	fmt.Fprintf(&b, "as the NodePort path is; measured right before each Service run with the same proxy's rules installed\n")
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
	r.writeComparison(&b, lab.ProxySvcnet, lab.ProxyKubeProxyNFTables)
	return b.String()
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
	for _, p := range pr.paths {
		d, s, r := summarize(p.direct), summarize(p.service), p.ratios()
		fmt.Fprintf(b, "%-17s %9.0f %9.0f %5.3fx  %9.0f %9.0f %5.3fx  %15s %15s %6d\n",
			p.path, d.keepAlive, s.keepAlive, r.keepAlive,
			d.newConn, s.newConn, r.newConn,
			us(d.p50)+"/"+us(s.p50), us(d.p99)+"/"+us(s.p99), d.errors+s.errors)
	}
}

// writeTargets writes svcnet's own targets: ratios to direct, and connect p99
// growth with the Service count.
func (r report) writeTargets(b *strings.Builder) {
	fmt.Fprintf(b, "\ntargets of %s\n", lab.ProxySvcnet)
	for _, c := range r.counts {
		pr := c.proxy(lab.ProxySvcnet)
		if pr == nil {
			continue
		}
		for _, p := range pr.paths {
			if !targeted(p.path) {
				continue
			}
			r := p.ratios()
			ka, nc := r.keepAlive, r.newConn
			fmt.Fprintf(b, "%5d Services %-17s keep-alive >= %.2fx direct: %-6s (%.3fx)   new connections >= %.2fx direct: %-6s (%.3fx)\n",
				c.services, p.path, targetKeepAlive, metOrMissed(ka >= targetKeepAlive), ka, targetNewConn, metOrMissed(nc >= targetNewConn), nc)
		}
	}
	if len(r.counts) < 2 {
		b.WriteString("connect p99 growth with Service count: not measured (one count only)\n")
		return
	}
	lo, hi := r.counts[0].proxy(lab.ProxySvcnet), r.counts[len(r.counts)-1].proxy(lab.ProxySvcnet)
	if lo == nil || hi == nil {
		return
	}
	for i, p := range hi.paths {
		if i >= len(lo.paths) {
			break
		}
		a, z := summarize(lo.paths[i].service).p99, summarize(p.service).p99
		g := ratio(float64(z), float64(a))
		fmt.Fprintf(b, "connect p99 %-17s with %d Services within %.0f%% of with %d: %-6s (%s vs %s, %.3fx)\n",
			p.path, r.counts[len(r.counts)-1].services, (targetP99Growth-1)*100, r.counts[0].services, metOrMissed(g <= targetP99Growth), us(z), us(a), g)
	}
}

// writeComparison writes the target "a at least equal to b on every figure",
// per count and path: keep-alive and new-connection ratios to direct at least
// b's, connect p99 at most b's. Nothing when either was not measured.
func (r report) writeComparison(b *strings.Builder, a, ref string) {
	if !slices.Contains(r.proxies(), a) || !slices.Contains(r.proxies(), ref) {
		return
	}
	fmt.Fprintf(b, "\n%s at least equal to %s on every figure (ratios to direct at least as high, connect p99 at most as long)\n", a, ref)
	met, all := 0, 0
	check := func(ok bool) string {
		all++
		if ok {
			met++
		}
		return metOrMissed(ok)
	}
	for _, c := range r.counts {
		pa, pb := c.proxy(a), c.proxy(ref)
		if pa == nil || pb == nil {
			continue
		}
		for i, p := range pa.paths {
			if i >= len(pb.paths) {
				break
			}
			sa, sb := summarize(p.service), summarize(pb.paths[i].service)
			ra, rb := p.ratios(), pb.paths[i].ratios()
			kaA, kaB := ra.keepAlive, rb.keepAlive
			ncA, ncB := ra.newConn, rb.newConn
			fmt.Fprintf(b, "%5d Services %-17s keep-alive: %-6s (%.3fx vs %.3fx)   new connections: %-6s (%.3fx vs %.3fx)   connect p99: %-6s (%s vs %s)\n",
				c.services, p.path, check(kaA >= kaB), kaA, kaB, check(ncA >= ncB), ncA, ncB, check(sa.p99 <= sb.p99), us(sa.p99), us(sb.p99))
		}
	}
	fmt.Fprintf(b, "%s >= %s on every figure: %s (%d of %d figures)\n", a, ref, metOrMissed(all > 0 && met == all), met, all)
}

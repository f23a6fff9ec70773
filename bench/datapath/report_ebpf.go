package datapathbench

import (
	"fmt"
	"slices"
	"strings"
)

// The eBPF plane's targets against direct pod traffic: its pod paths pay
// nothing per packet (the connect is translated at the socket), so they
// must match direct; the NodePort and LoadBalancer paths meet its nftables
// rules and may cost a little.
const (
	ebpfPodRatio    = 1.00 // keep-alive and new connections, pod -> ClusterIP
	ebpfPodExcessUS = 1.0  // connect p50 and p99 over direct, pod -> ClusterIP
	ebpfExtRatio    = 0.98 // keep-alive and new connections, NodePort and LB
)

// podPath reports whether path starts at a pod (the socket load balancer's
// paths).
func podPath(path string) bool { return path == pathClusterIPRemote || path == pathClusterIPLocal }

// writeEBPFTargets writes the eBPF plane's targets per count and path:
// pod -> ClusterIP keep-alive and new connections at least 1.00x direct and
// connect p50 and p99 at most 1us over direct; NodePort and LB at least
// 0.98x direct. Each median is judged strictly and printed with its
// bootstrap interval. Nothing when the plane was not measured.
func (r report) writeEBPFTargets(b *strings.Builder) {
	if !slices.Contains(r.proxies(), proxySvcnetEBPF) {
		return
	}
	fmt.Fprintf(b, "\ntargets of %s (the median of the paired ratios or excesses, and its %.0f%% bootstrap interval)\n", proxySvcnetEBPF, bootstrapLevel*100)
	for _, c := range r.counts {
		pr := c.proxy(proxySvcnetEBPF)
		if pr == nil {
			continue
		}
		for _, p := range pr.paths {
			kas, ncs := p.pairRatios()
			ka, nc := median(kas), median(ncs)
			kaLo, kaHi := medianCI(kas)
			ncLo, ncHi := medianCI(ncs)
			want := ebpfExtRatio
			if podPath(p.path) {
				want = ebpfPodRatio
			}
			fmt.Fprintf(b, "%5d Services %-17s keep-alive >= %.2fx direct: %-6s (%.3fx, %.3f-%.3f)   new connections >= %.2fx direct: %-6s (%.3fx, %.3f-%.3f)",
				c.services, p.path, want, metOrMissed(ka >= want), ka, kaLo, kaHi, want, metOrMissed(nc >= want), nc, ncLo, ncHi)
			if podPath(p.path) {
				for _, q := range []float64{.5, .99} {
					ex := p.pairExcess(q)
					lo, hi := medianCI(ex)
					fmt.Fprintf(b, "   connect p%.0f <= +%.0fus over direct: %-6s (%+.1fus, %+.1f-%+.1f)",
						q*100, ebpfPodExcessUS, metOrMissed(median(ex) <= ebpfPodExcessUS), median(ex), lo, hi)
				}
			}
			b.WriteString("\n")
		}
	}
}

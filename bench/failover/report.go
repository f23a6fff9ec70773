package failoverbench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Targets: a LoadBalancer IP works again within these after its node fails
// (MetalLB's documentation promises "a few seconds"; over 10 s it calls a bug).
const (
	targetP50 = time.Second
	targetMax = 2 * time.Second
)

// report is the benchmark's result.
type report struct {
	kills             int
	nodeFail          []time.Duration
	handover          []time.Duration
	silent, restarted tally
	skipped           int
}

// tally counts requests around the rounds of one kind, and the rounds in
// which the IP moved.
type tally struct{ failed, total, moved int }

func (t *tally) add(failed, total int, moved bool) {
	t.failed += failed
	t.total += total
	if moved {
		t.moved++
	}
}

// quantile returns the q-quantile (nearest rank) of ds, which it does not modify.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func (r report) String() string {
	var b strings.Builder
	ms := func(d time.Duration) string { return fmt.Sprintf("%7.0f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(&b, "svcnet lb failover: %d rounds each, client request every %s (new connection, %s timeout)\n", r.kills, requestInterval, requestTimeout)
	fmt.Fprintf(&b, "%-58s %10s %10s %10s\n", "figure", "p50", "p90", "max")
	fmt.Fprintf(&b, "%-58s %10s %10s %10s\n", "node failure (agent killed + node cut off) -> first success", ms(quantile(r.nodeFail, .5)), ms(quantile(r.nodeFail, .9)), ms(quantile(r.nodeFail, 1)))
	fmt.Fprintf(&b, "%-58s %10s %10s %10s\n", "agent silent -> client's ARP entry names another node", ms(quantile(r.handover, .5)), ms(quantile(r.handover, .9)), ms(quantile(r.handover, 1)))
	fmt.Fprintf(&b, "requests failed around silent agents (node still forwarding): %d of %d\n", r.silent.failed, r.silent.total)
	fmt.Fprintf(&b, "requests failed around agent kills (restarted by its supervisor): %d of %d; rounds in which the IP moved: %d of %d\n",
		r.restarted.failed, r.restarted.total, r.restarted.moved, r.kills)
	fmt.Fprintf(&b, "client ticks skipped: %d\n", r.skipped)
	p50, mx := quantile(r.nodeFail, .5), quantile(r.nodeFail, 1)
	fmt.Fprintf(&b, "target p50 <= %s: %s (%s)\n", targetP50, metOrMissed(p50 <= targetP50), strings.TrimSpace(ms(p50)))
	fmt.Fprintf(&b, "target max <= %s: %s (%s)\n", targetMax, metOrMissed(mx <= targetMax), strings.TrimSpace(ms(mx)))
	return b.String()
}

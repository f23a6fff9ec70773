package dnsbench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/process"
)

// Round is one measurement of one server.
type Round struct {
	Server string
	Stats  Stats
	// CPU is the server's CPU time in the measurement divided by its length
	// (1.0: one core busy throughout).
	CPU float64
}

// Target is the throughput svcnet must reach, as a multiple of CoreDNS's.
const Target = 1.0

// Servers, by the names the rounds carry.
const (
	ServerCoreDNS = "coredns"
	ServerSvcnet  = "svcnet"
)

// summary is one server's rounds merged.
type summary struct {
	all    Stats
	rounds []float64 // queries/s per round
	cpu    float64   // mean
}

func summarize(rounds []Round, server string) summary {
	var s summary
	for _, r := range rounds {
		if r.Server != server {
			continue
		}
		s.all.Merge(r.Stats)
		s.rounds = append(s.rounds, r.Stats.QPS())
		s.cpu += r.CPU
	}
	if len(s.rounds) > 0 {
		s.cpu /= float64(len(s.rounds))
	}
	return s
}

// Report is the benchmark's result table: per server the queries/s of every
// round and overall, p50 and p99 latency, lost and wrong answers and CPU use,
// then the ratio svcnet/CoreDNS against Target.
func Report(rounds []Round, header string) string {
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "%-8s %-26s %9s %9s %9s %7s %6s %5s\n", "server", "queries/s per round", "queries/s", "p50", "p99", "lost", "wrong", "CPU")
	sums := map[string]summary{}
	for _, name := range []string{ServerCoreDNS, ServerSvcnet} {
		s := summarize(rounds, name)
		sums[name] = s
		var per []string
		for _, q := range s.rounds {
			per = append(per, strconv.FormatFloat(q, 'f', 0, 64))
		}
		fmt.Fprintf(&b, "%-8s %-26s %9.0f %9s %9s %7d %6d %4.0f%%\n", name, strings.Join(per, " "), s.all.QPS(),
			fmtDur(s.all.Percentile(50)), fmtDur(s.all.Percentile(99)), s.all.Lost, s.all.Wrong, 100*s.cpu)
	}
	core, sv := sums[ServerCoreDNS].all.QPS(), sums[ServerSvcnet].all.QPS()
	if core > 0 {
		ratio := sv / core
		verdict := "met"
		if ratio < Target {
			verdict = "missed"
		}
		fmt.Fprintf(&b, "ratio svcnet/coredns queries/s: %.2fx (target >= %.1fx: %s)\n", ratio, Target, verdict)
		if c, s := sums[ServerCoreDNS].rounds, sums[ServerSvcnet].rounds; len(c) == len(s) && len(c) > 1 {
			var per []string
			for i := range c {
				if c[i] > 0 {
					per = append(per, fmt.Sprintf("%.2fx", s[i]/c[i]))
				}
			}
			fmt.Fprintf(&b, "ratio per round (each svcnet round against the CoreDNS round before it): %s\n", strings.Join(per, " "))
		}
		if p := sums[ServerSvcnet].all.Percentile(99); p > 0 {
			fmt.Fprintf(&b, "ratio coredns/svcnet p99 latency: %.2fx (above 1: svcnet faster)\n",
				float64(sums[ServerCoreDNS].all.Percentile(99))/float64(p))
		}
	}
	return b.String()
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dµs", d/time.Microsecond)
	}
}

// cpuTime is the CPU time (user and system) process pid has used.
func cpuTime(pid int) (time.Duration, error) { return process.CPUTime(pid) }

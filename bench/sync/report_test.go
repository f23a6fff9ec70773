package syncbench

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func ms(n ...int) []time.Duration {
	var out []time.Duration
	for _, v := range n {
		out = append(out, time.Duration(v)*time.Millisecond)
	}
	return out
}

func TestPercentile(t *testing.T) {
	var fifty []time.Duration
	for i := 50; i >= 1; i-- {
		fifty = append(fifty, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, -1},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(3, 1, 2), 50, 2 * time.Millisecond},
		{fifty, 50, 25 * time.Millisecond},
		{fifty, 99, 50 * time.Millisecond},
		{fifty, 100, 50 * time.Millisecond},
	} {
		if got := Percentile(tc.ds, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.ds, tc.p, got, tc.want)
		}
	}
	if fifty[0] != 50*time.Millisecond {
		t.Errorf("Percentile sorted its input in place")
	}
}

func TestFmtDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-1:                       "-",
		950 * time.Microsecond:   "950µs",
		12340 * time.Microsecond: "12.3ms",
		11200 * time.Millisecond: "11.20s",
	} {
		if got := FmtDur(d); got != want {
			t.Errorf("FmtDur(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestSummaryRatiosAndTargets(t *testing.T) {
	rs := []Result{
		{Tool: ToolSvcnet, N: 10000, Full: 500 * time.Millisecond, Changes: ms(10, 20, 30), Creates: ms(8, 15, 27),
			Programs: []time.Duration{-500 * time.Microsecond, 4 * time.Millisecond, -200 * time.Microsecond}, RSS: 80 << 20, RSSEnd: 90 << 20, HWM: 150 << 20},
		{Tool: ToolKubeProxy, N: 10000, Full: 11 * time.Second, Changes: ms(3300, 3500, 3800), RSS: 326 << 20},
		{Tool: ToolSvcnet, N: 1000, Full: 100 * time.Millisecond, Changes: ms(60), RSS: 200 << 20, Timeouts: 1, Err: "boom"},
	}
	out := Summary(rs)
	for _, want := range []string{
		"22.0x",  // full: 11s / 500ms
		"126.7x", // p99: 3.8s / 30ms
		"4.1x",   // RSS: 326 / 80
		"1 (+1 lost)",
		"note: svcnet at N=1000 failed: boom",
		"the Create call alone: p99 27.0ms",
		"-200µs", // programming p50: the element came before the bench saw the event
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		"svcnet full sync <= 1s",
		"svcnet change p99 <= 50ms",
		"svcnet programming p99 <= 50ms (watch event to kernel)",
		"svcnet RSS <= 100MiB",
		"full sync >= 10x faster than kube-proxy",
		"change p99 >= 10x faster than kube-proxy",
	} {
		if !regexp.MustCompile(regexp.QuoteMeta(want) + ` +met `).MatchString(out) {
			t.Errorf("summary lacks %q as met:\n%s", want, out)
		}
	}

	rs[0].Full = 2 * time.Second
	rs[0].Changes = ms(10, 20, 900)
	rs[0].Programs = ms(10, 20, 60)
	ts := Targets(rs)
	missed := map[string]bool{}
	for _, tg := range ts {
		if tg.Known && !tg.Met {
			missed[tg.What] = true
		}
	}
	for _, w := range []string{"svcnet full sync <= 1s", "svcnet change p99 <= 50ms", "svcnet programming p99 <= 50ms (watch event to kernel)", "full sync >= 10x faster than kube-proxy", "change p99 >= 10x faster than kube-proxy"} {
		if !missed[w] {
			t.Errorf("target %q not missed: %+v", w, ts)
		}
	}
	if missed["svcnet RSS <= 100MiB"] {
		t.Errorf("RSS target missed at 80MiB")
	}
}

func TestTargetsWithoutMeasurements(t *testing.T) {
	ts := Targets([]Result{{Tool: ToolKubeProxy, N: 10000}})
	if len(ts) != 1 || ts[0].Known {
		t.Fatalf("Targets without svcnet = %+v, want one unknown target", ts)
	}
}

// The iptables pair gets its ratios in the table and its own targets section;
// the nftables targets are left out when only the iptables pair ran.
func TestSummaryIPTables(t *testing.T) {
	rs := []Result{
		{Tool: ToolSvcnetIPTables, N: 10000, Full: 2 * time.Second, Changes: ms(100, 120, 150), RSS: 60 << 20, RSSEnd: 70 << 20, HWM: 90 << 20},
		{Tool: ToolKubeProxyIPTables, N: 10000, Full: 40 * time.Second, Changes: ms(1500, 1600, 1800), RSS: 300 << 20, RSSEnd: 310 << 20},
	}
	out := Summary(rs)
	for _, want := range []string{
		"20.0x", // full: 40s / 2s
		"12.0x", // p99: 1.8s / 150ms
		"5.0x",  // RSS: 300 / 60
		"iptables layout (iptables-nft): svcnet-iptables vs kube-proxy-iptables",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		"full sync >= 10x faster than kube-proxy-iptables",
		"change p99 >= 10x faster than kube-proxy-iptables",
		"RSS <= kube-proxy-iptables's",
	} {
		if !regexp.MustCompile(regexp.QuoteMeta(want) + ` +met `).MatchString(out) {
			t.Errorf("summary lacks %q as met:\n%s", want, out)
		}
	}
	if strings.Contains(out, "nftables layout") {
		t.Errorf("nftables targets printed without an nftables tool:\n%s", out)
	}

	rs[0].Full = 5 * time.Second
	rs[0].Changes = ms(100, 120, 400)
	rs[0].RSSEnd = 320 << 20
	missed := map[string]bool{}
	for _, tg := range IPTablesTargets(rs) {
		if tg.Known && !tg.Met {
			missed[tg.What] = true
		}
	}
	for _, w := range []string{"full sync >= 10x faster than kube-proxy-iptables", "change p99 >= 10x faster than kube-proxy-iptables", "RSS <= kube-proxy-iptables's"} {
		if !missed[w] {
			t.Errorf("target %q not missed: %v", w, missed)
		}
	}
	if ts := IPTablesTargets(rs[1:]); len(ts) != 1 || ts[0].Known {
		t.Errorf("IPTablesTargets without svcnet-iptables = %+v, want one unknown target", ts)
	}
	if ts := IPTablesTargets(rs[:1]); len(ts) != 1 || ts[0].Known {
		t.Errorf("IPTablesTargets without kube-proxy-iptables = %+v, want one unknown target", ts)
	}
	// Both layouts in one run: both sections, each row against its own baseline.
	both := append([]Result{
		{Tool: ToolSvcnet, N: 10000, Full: 500 * time.Millisecond, Changes: ms(30), RSS: 80 << 20},
		{Tool: ToolKubeProxy, N: 10000, Full: 11 * time.Second, Changes: ms(3600), RSS: 326 << 20},
	}, rs...)
	out = Summary(both)
	for _, want := range []string{"nftables layout", "iptables layout", "22.0x", "120.0x", "8.0x", "4.5x"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary of both layouts lacks %q:\n%s", want, out)
		}
	}
}

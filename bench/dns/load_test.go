package dnsbench

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
)

// fakeServer answers A queries on 127.0.0.1: names in known get one record,
// others NXDOMAIN (or, with lie set, NOERROR without records); with dropEvery
// > 0 every dropEvery-th query gets no answer.
func fakeServer(t *testing.T, known []string, lie bool, dropEvery int64) string {
	t.Helper()
	set := map[string]bool{}
	for _, n := range known {
		set[strings.ToLower(n)] = true
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var count atomic.Int64
	dnstest.Serve(t, dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if dropEvery > 0 && count.Add(1)%dropEvery == 0 {
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case set[strings.ToLower(q.Name)]:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(10, 96, 0, 1)}}
		case !lie:
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	}), pc, nil)
	return pc.LocalAddr().String()
}

func TestLoad(t *testing.T) {
	names := []string{"svc-00000.bench.svc.cluster.local.", "svc-00001.bench.svc.cluster.local."}
	missing := []string{"missing-000.bench.svc.cluster.local."}
	base := LoadConfig{Names: names, Missing: missing, MissingEvery: 5, Sockets: 2, InFlight: 4,
		Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, Timeout: 100 * time.Millisecond}
	ctx := context.Background()

	t.Run("correct", func(t *testing.T) {
		// A server that answers every query loses none: lost counts a query
		// unanswered after Timeout, and on a loaded machine an answer on
		// loopback can take longer than base's 100ms (the server's or the
		// generator's goroutine waits for a core). With a timeout no
		// scheduling delay reaches, a loss is a query that was never
		// answered. Load returns once every query is answered, so the
		// longer timeout does not make the test longer.
		cfg := base
		cfg.Timeout = time.Minute
		cfg.Addr = fakeServer(t, names, false, 0)
		start := time.Now()
		st, err := Load(ctx, cfg)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if st.Answered < 50 || st.Wrong != 0 || st.Lost != 0 || st.Elapsed != cfg.Duration {
			t.Fatalf("stats: answered %d wrong %d (%s) lost %d elapsed %v", st.Answered, st.Wrong, st.FirstWrong, st.Lost, st.Elapsed)
		}
		if int64(len(st.Latencies)) != st.Answered || !slices.IsSorted(st.Latencies) {
			t.Errorf("%d latencies (sorted %v) for %d answers", len(st.Latencies), slices.IsSorted(st.Latencies), st.Answered)
		}
		// No answer can take longer than the whole run.
		if p50, p99 := st.Percentile(50), st.Percentile(99); p50 <= 0 || p99 < p50 || p99 > took {
			t.Errorf("p50 %v p99 %v (the run took %v)", p50, p99, took)
		}
		if q := st.QPS(); q < 100 {
			t.Errorf("QPS %.0f", q)
		}
	})
	t.Run("wrong answers", func(t *testing.T) {
		cfg := base
		cfg.Addr = fakeServer(t, names, true, 0)
		st, err := Load(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Wrong == 0 || !strings.Contains(st.FirstWrong, "want NXDOMAIN") {
			t.Fatalf("wrong %d (%q), want the missing names counted", st.Wrong, st.FirstWrong)
		}
		// Every 5th query is a missing name; about a fifth are wrong.
		if st.Wrong > st.Answered/3 {
			t.Errorf("wrong %d of %d", st.Wrong, st.Answered)
		}
	})
	t.Run("lost answers", func(t *testing.T) {
		cfg := base
		cfg.Addr = fakeServer(t, names, false, 10)
		st, err := Load(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Lost == 0 || st.Answered == 0 || st.Wrong != 0 {
			t.Fatalf("answered %d lost %d wrong %d, want losses counted and the load going on", st.Answered, st.Lost, st.Wrong)
		}
	})
	t.Run("no names", func(t *testing.T) {
		if _, err := Load(ctx, LoadConfig{Addr: "127.0.0.1:53"}); err == nil {
			t.Error("no error without names")
		}
	})
}

func TestPercentile(t *testing.T) {
	lat := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {11, 2}} {
		if got := percentile(lat, c.p); got != c.want*time.Microsecond {
			t.Errorf("p%v = %v, want %vµs", c.p, got, int64(c.want))
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty: want 0")
	}
}

func TestReport(t *testing.T) {
	round := func(server string, answered int64, p50 uint32) Round {
		return Round{Server: server, CPU: 1, Stats: Stats{Answered: answered, Elapsed: 10 * time.Second, Latencies: []uint32{p50, p50, 2 * p50}}}
	}
	met := Report([]Round{round(ServerCoreDNS, 100000, 500), round(ServerSvcnet, 150000, 300)}, "")
	for _, want := range []string{"ratio svcnet/coredns queries/s: 1.50x (target >= 1.0x: met)", "10000", "15000", "500µs", "1.00ms", "100%"} {
		if !strings.Contains(met, want) {
			t.Errorf("report lacks %q:\n%s", want, met)
		}
	}
	two := Report([]Round{round(ServerCoreDNS, 100000, 500), round(ServerSvcnet, 150000, 300), round(ServerCoreDNS, 100000, 500), round(ServerSvcnet, 200000, 300)}, "")
	if !strings.Contains(two, "ratio per round (each svcnet round against the CoreDNS round before it): 1.50x 2.00x") ||
		!strings.Contains(two, "1.75x (target >= 1.0x: met)") {
		t.Errorf("report:\n%s", two)
	}
	missed := Report([]Round{round(ServerCoreDNS, 100000, 500), round(ServerSvcnet, 90000, 300)}, "")
	if !strings.Contains(missed, "0.90x (target >= 1.0x: missed)") {
		t.Errorf("report:\n%s", missed)
	}
}

func TestCPUTime(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	after, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before || x == 0 {
		t.Errorf("cpu time %v then %v after 50ms busy", before, after)
	}
	if _, err := cpuTime(-1); err == nil {
		t.Error("no error for pid -1")
	}
}

package dns

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/model"
)

// upstream is a fake resolver on loopback (UDP and TCP on one port): it
// answers example.com. A 192.0.2.1, many.example.com. with 100 A records
// (truncated over UDP to the query's size), and NXDOMAIN for the rest.
type upstream struct {
	addr    string
	queries atomic.Int32
	tcp     atomic.Int32
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	pc, l, err := listenPair(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = pc.LocalAddr().String()
	dnstest.Serve(t, u, pc, l)
	return u
}

func (u *upstream) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	u.queries.Add(1)
	udp := w.LocalAddr().Network() == "udp"
	if !udp {
		u.tcp.Add(1)
	}
	resp := new(dns.Msg).SetReply(req)
	resp.RecursionAvailable = true
	q := req.Question[0]
	switch strings.ToLower(q.Name) {
	case "example.com.":
		resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
	case "many.example.com.":
		for i := range 100 {
			resp.Answer = append(resp.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, byte(i+1))})
		}
	default:
		resp.Rcode = dns.RcodeNameError
	}
	size := dns.MaxMsgSize
	if udp {
		size = dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
			resp.SetEdns0(opt.UDPSize(), false)
		}
	}
	resp.Truncate(size)
	_ = w.WriteMsg(resp)
}

// deadUDP returns a loopback address where nothing listens.
func deadUDP(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := pc.LocalAddr().String()
	pc.Close()
	return a
}

func TestOutsideNamesRefusedWithoutUpstream(t *testing.T) {
	_, addr := start(t, ServerConfig{}, syncedStore())
	for _, name := range []string{"example.com.", "kubernetes.io.", "cluster.local.example.", "5.5.5.5.in-addr.arpa."} {
		qt := dns.TypeA
		if strings.HasSuffix(name, ".arpa.") {
			qt = dns.TypePTR
		}
		r := ask(t, "udp", addr, question(name, qt))
		if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 || r.RecursionAvailable {
			t.Errorf("%s: rcode %s, %d answers, ra %v; want REFUSED, none, no recursion", name, dns.RcodeToString[r.Rcode], len(r.Answer), r.RecursionAvailable)
		}
	}
}

func TestForwarding(t *testing.T) {
	u := startUpstream(t)
	dead := deadUDP(t)
	s, addr := start(t, ServerConfig{Upstreams: []string{dead, u.addr}}, syncedStore())

	// The first upstream is down: the second answers; the client's ID and the
	// question's case come back unchanged.
	m := question("Example.COM.", dns.TypeA)
	r := ask(t, "udp", addr, m)
	if r.Rcode != dns.RcodeSuccess || !slices.Equal(answerData(r), []string{"192.0.2.1"}) {
		t.Fatalf("example.com: rcode %s, answer %v", dns.RcodeToString[r.Rcode], answerData(r))
	}
	if r.Id != m.Id || r.Question[0].Name != "Example.COM." || !r.RecursionAvailable {
		t.Errorf("id %d (sent %d), question %q, ra %v", r.Id, m.Id, r.Question[0].Name, r.RecursionAvailable)
	}
	// Upstream rcodes pass through.
	if r := ask(t, "udp", addr, question("nothing.example.com.", dns.TypeA)); r.Rcode != dns.RcodeNameError {
		t.Errorf("nothing.example.com: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	// The zone's names are still answered locally.
	before := u.queries.Load()
	if r := ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("zone name with upstreams: rcode %s", dns.RcodeToString[r.Rcode])
	}
	if u.queries.Load() != before {
		t.Errorf("a zone name went upstream")
	}

	// A big answer: the upstream truncates over UDP, the server asks again
	// over TCP, and gives the client what its own transport allows.
	r = ask(t, "tcp", addr, question("many.example.com.", dns.TypeA))
	if len(r.Answer) != 100 || r.Truncated {
		t.Errorf("many.example.com over tcp: %d records, TC %v; want 100", len(r.Answer), r.Truncated)
	}
	if u.tcp.Load() == 0 {
		t.Errorf("the server never retried the upstream over TCP")
	}
	r, n := askSize(t, "udp", addr, question("many.example.com.", dns.TypeA))
	if !r.Truncated || n > 512 {
		t.Errorf("many.example.com over udp without EDNS0: TC %v, %d bytes; want TC within 512", r.Truncated, n)
	}
	waitFor(2*time.Second, func() bool { return counter(t, s.Metrics(), "A", "NOERROR") >= 3 })
	if got := counter(t, s.Metrics(), "A", "NOERROR"); got < 3 {
		t.Errorf("forwarded answers counted %v times", got)
	}
}

func TestForwardingFailsWithServfail(t *testing.T) {
	_, addr := start(t, ServerConfig{Upstreams: []string{deadUDP(t), deadUDP(t)}}, syncedStore())
	t0 := time.Now()
	r := ask(t, "udp", addr, question("example.com.", dns.TypeA))
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("no upstream answering: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if d := time.Since(t0); d > 2*forwardTimeout+time.Second {
		t.Errorf("took %v, more than the upstreams' timeouts", d)
	}
}

// TestForwardingBeforeSync: names outside the zone are forwarded while the
// zone still answers SERVFAIL.
func TestForwardingBeforeSync(t *testing.T) {
	u := startUpstream(t)
	_, addr := start(t, ServerConfig{Upstreams: []string{u.addr}}, model.NewStore())
	if r := ask(t, "udp", addr, question("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("outside name before sync: rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if r := ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("zone name before sync: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if got := fmt.Sprint(u.queries.Load()); got != "1" {
		t.Errorf("upstream asked %s times, want 1", got)
	}
}

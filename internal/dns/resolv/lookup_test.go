package resolv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
)

// fakeServer is a name server on loopback (UDP and TCP, one port) answering
// from a fixed table and recording the questions it was asked.
type fakeServer struct {
	addr    string
	mu      sync.Mutex
	asked   []string // "name type network"
	records map[string][]string
}

// startFake serves records (name → zone-file lines) until the test ends.
// Unknown names get NXDOMAIN; over UDP, answers larger than 512 bytes are
// truncated.
func startFake(t *testing.T, records map[string][]string) *fakeServer {
	t.Helper()
	f := &fakeServer{records: records}
	pc, l := listenLoopback(t)
	f.addr = pc.LocalAddr().String()
	dnstest.Serve(t, f, pc, l)
	return f
}

// listenLoopback opens UDP and TCP on one free loopback port, trying other
// ports (a bounded number of times) when TCP's is taken.
func listenLoopback(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l
		}
		pc.Close()
	}
	t.Fatal("no loopback port free on both udp and tcp")
	return nil, nil
}

func (f *fakeServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	f.mu.Lock()
	f.asked = append(f.asked, fmt.Sprintf("%s %s %s", q.Name, dns.TypeToString[q.Qtype], w.LocalAddr().Network()))
	f.mu.Unlock()
	resp := new(dns.Msg).SetReply(req)
	lines, ok := f.records[strings.ToLower(q.Name)]
	if !ok {
		resp.Rcode = dns.RcodeNameError
	}
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			panic(err)
		}
		if rr.Header().Rrtype == q.Qtype {
			resp.Answer = append(resp.Answer, rr)
		}
	}
	if w.LocalAddr().Network() == "udp" {
		resp.Truncate(dns.MinMsgSize)
	}
	_ = w.WriteMsg(resp)
}

func (f *fakeServer) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

func labConfig(servers ...string) Config {
	return Config{Nameservers: servers, Search: []string{"default.svc.cluster.local.", "svc.cluster.local.", "cluster.local."},
		Ndots: 5, Timeout: 2 * time.Second, Attempts: 1}
}

func TestLookupSearchesInGlibcOrder(t *testing.T) {
	f := startFake(t, map[string][]string{
		"my-nginx.default.svc.cluster.local.":   {"my-nginx.default.svc.cluster.local. 5 IN A 10.96.0.20"},
		"kubernetes.default.svc.cluster.local.": {"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"},
	})
	ctx := context.Background()
	r, err := labConfig(f.addr).Lookup(ctx, "my-nginx", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 1 || RData(r.Answer[0]) != "10.96.0.20" {
		t.Fatalf("answer %v", r.Answer)
	}
	// Four dots, fewer than ndots: the search list comes first.
	if _, err := labConfig(f.addr).Lookup(ctx, "kubernetes.default", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"my-nginx.default.svc.cluster.local. A udp",
		"kubernetes.default.default.svc.cluster.local. A udp",
		"kubernetes.default.svc.cluster.local. A udp",
	}
	if d := cmp.Diff(want, f.questions()); d != "" {
		t.Errorf("questions asked (-want +got):\n%s", d)
	}
}

func TestLookupNotFoundNamesEveryNameTried(t *testing.T) {
	f := startFake(t, map[string][]string{
		// Exists, but has no AAAA: NODATA.
		"web.svc.cluster.local.": {"web.svc.cluster.local. 5 IN A 10.96.0.30"},
	})
	_, err := labConfig(f.addr).Lookup(context.Background(), "web", dns.TypeAAAA)
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("error %v, want a *NotFoundError", err)
	}
	want := "web AAAA: no answer; tried web.default.svc.cluster.local. (NXDOMAIN), web.svc.cluster.local. (NODATA), " +
		"web.cluster.local. (NXDOMAIN), web. (NXDOMAIN)"
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
}

func TestLookupRetriesTruncatedOverTCP(t *testing.T) {
	name := "big.default.svc.cluster.local."
	var lines []string
	for i := range 60 {
		lines = append(lines, fmt.Sprintf("%s 5 IN A 10.1.0.%d", name, i+1))
	}
	f := startFake(t, map[string][]string{name: lines})
	r, err := labConfig(f.addr).Lookup(context.Background(), "big", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 60 || r.Truncated {
		t.Errorf("got %d records (truncated %v), want all 60", len(r.Answer), r.Truncated)
	}
	want := []string{name + " A udp", name + " A tcp"}
	if d := cmp.Diff(want, f.questions()); d != "" {
		t.Errorf("questions asked (-want +got):\n%s", d)
	}
}

func TestQueryMovesToTheNextServer(t *testing.T) {
	// A closed UDP port on loopback: the query fails at once (ICMP unreachable).
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	f := startFake(t, map[string][]string{"a.example.": {"a.example. 5 IN TXT \"hi\""}})
	r, err := labConfig(dead, f.addr).Query(context.Background(), "a.example", dns.TypeTXT)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 1 || RData(r.Answer[0]) != `"hi"` {
		t.Errorf("answer %v", r.Answer)
	}
	// No server at all: the error names the server.
	_, err = labConfig(dead).Query(context.Background(), "a.example", dns.TypeTXT)
	if err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("error %v does not name %s", err, dead)
	}
}

func TestLookupRejectsBadNames(t *testing.T) {
	for _, n := range []string{"", ".", "a..b"} {
		if _, err := labConfig("127.0.0.1:1").Lookup(context.Background(), n, dns.TypeA); err == nil {
			t.Errorf("Lookup(%q): no error", n)
		}
	}
}

func TestRData(t *testing.T) {
	for in, want := range map[string]string{
		"a. 5 IN A 10.0.0.1":                   "10.0.0.1",
		"a. 5 IN AAAA fd00::1":                 "fd00::1",
		"_http._tcp.a. 5 IN SRV 0 100 80 b.a.": "0 100 80 b.a.",
		"x. 5 IN CNAME y.example.":             "y.example.",
		"a. 5 IN TXT \"1.1.0\"":                `"1.1.0"`,
	} {
		rr, err := dns.NewRR(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := RData(rr); got != want {
			t.Errorf("RData(%s) = %q, want %q", in, got, want)
		}
	}
}

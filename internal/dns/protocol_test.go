package dns

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const bigName = "big.default.svc.cluster.local."

// withEDNS returns m with an OPT record of the given UDP size and DO bit.
func withEDNS(m *dns.Msg, size uint16, do bool) *dns.Msg {
	return m.SetEdns0(size, do)
}

// askSize sends m over network and returns the answer with its size on the
// wire.
func askSize(t *testing.T, network, addr string, m *dns.Msg) (*dns.Msg, int) {
	t.Helper()
	if network == "udp" {
		r, n := rawExchange(t, addr, pack(t, m), 3*time.Second)
		if r == nil {
			t.Fatalf("%s: no answer over udp", m.Question[0].Name)
		}
		return r, n
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	co := &dns.Conn{Conn: c}
	if err := co.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	b, err := co.ReadMsgHeader(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		t.Fatal(err)
	}
	return r, len(b)
}

func TestEDNS0(t *testing.T) {
	_, addr := start(t, ServerConfig{}, syncedStore())

	r := ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA))
	if r.IsEdns0() != nil {
		t.Errorf("query without OPT: answer has one")
	}

	r = ask(t, "udp", addr, withEDNS(question("my-nginx.default.svc.cluster.local.", dns.TypeA), 4096, true))
	opt := r.IsEdns0()
	switch {
	case opt == nil:
		t.Fatal("query with OPT: answer has none")
	case opt.UDPSize() != 4096 || !opt.Do() || opt.Version() != 0 || len(opt.Option) != 0:
		t.Errorf("answer OPT: size %d, do %v, version %d, options %v; want 4096, true, 0, none", opt.UDPSize(), opt.Do(), opt.Version(), opt.Option)
	case r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1:
		t.Errorf("answer with OPT: rcode %s, %d records", dns.RcodeToString[r.Rcode], len(r.Answer))
	}

	// A size under 512 counts as 512, and is advertised so.
	r = ask(t, "udp", addr, withEDNS(question("my-nginx.default.svc.cluster.local.", dns.TypeA), 100, false))
	if opt := r.IsEdns0(); opt == nil || opt.UDPSize() != 512 || opt.Do() {
		t.Errorf("OPT of size 100: answer OPT %v, want size 512 without DO", opt)
	}

	// EDNS version 1: BADVERS, with an OPT of version 0.
	m := withEDNS(question("my-nginx.default.svc.cluster.local.", dns.TypeA), 1232, false)
	m.IsEdns0().SetVersion(1)
	r = ask(t, "udp", addr, m)
	if opt := r.IsEdns0(); r.Rcode != dns.RcodeBadVers || opt == nil || opt.Version() != 0 || len(r.Answer) != 0 {
		t.Errorf("EDNS version 1: rcode %d, OPT %v, %d answers; want BADVERS (16), OPT version 0, none", r.Rcode, opt, len(r.Answer))
	}

	// Two OPT records: FORMERR.
	m = withEDNS(withEDNS(question("my-nginx.default.svc.cluster.local.", dns.TypeA), 1232, false), 1232, false)
	if r = ask(t, "udp", addr, m); r.Rcode != dns.RcodeFormatError {
		t.Errorf("two OPT records: rcode %s, want FORMERR", dns.RcodeToString[r.Rcode])
	}
}

// TestTruncationThenTCP: a headless Service with 100 endpoints does not fit a
// 512-byte (or 1232-byte) UDP answer: it is truncated with TC set; with a
// large enough EDNS0 buffer, or over TCP, it comes whole.
func TestTruncationThenTCP(t *testing.T) {
	_, addr := start(t, ServerConfig{}, syncedStore())
	for _, tc := range []struct {
		name     string
		network  string
		size     uint16 // 0: no OPT
		limit    int
		complete bool
	}{
		{"udp without EDNS0", "udp", 0, 512, false},
		{"udp EDNS0 1232", "udp", 1232, 1232, false},
		{"udp EDNS0 4096", "udp", 4096, 4096, true},
		{"tcp", "tcp", 0, 65535, true},
		{"tcp EDNS0 512", "tcp", 512, 65535, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := question(bigName, dns.TypeA)
			if tc.size > 0 {
				withEDNS(m, tc.size, false)
			}
			r, n := askSize(t, tc.network, addr, m)
			if r.Rcode != dns.RcodeSuccess {
				t.Fatalf("rcode %s", dns.RcodeToString[r.Rcode])
			}
			if n > tc.limit {
				t.Errorf("answer of %d bytes, over the limit %d", n, tc.limit)
			}
			if tc.complete {
				if r.Truncated || len(r.Answer) != bigEndpoints {
					t.Errorf("TC %v, %d records; want all %d", r.Truncated, len(r.Answer), bigEndpoints)
				}
				return
			}
			if !r.Truncated || len(r.Answer) >= bigEndpoints {
				t.Errorf("TC %v, %d records; want TC and fewer than %d", r.Truncated, len(r.Answer), bigEndpoints)
			}
			if (tc.size > 0) != (r.IsEdns0() != nil) {
				t.Errorf("truncated answer OPT %v, query had size %d", r.IsEdns0(), tc.size)
			}
		})
	}
	// A client that follows TC gets everything (miekg's client does not retry
	// by itself: do as a stub resolver does).
	r := ask(t, "udp", addr, question(bigName, dns.TypeA))
	if r.Truncated {
		r = ask(t, "tcp", addr, question(bigName, dns.TypeA))
	}
	if len(r.Answer) != bigEndpoints {
		t.Errorf("after TCP fallback: %d records, want %d", len(r.Answer), bigEndpoints)
	}
}

// rawExchange sends b over UDP to addr and returns the answer and its size,
// or nil when none comes within wait.
func rawExchange(t *testing.T, addr string, b []byte, wait time.Duration) (*dns.Msg, int) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil, 0
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	return r, n
}

func pack(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMalformedAndUnsupportedQueries(t *testing.T) {
	s, addr := start(t, ServerConfig{}, syncedStore())

	two := question("my-nginx.default.svc.cluster.local.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "big.default.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	none := question("my-nginx.default.svc.cluster.local.", dns.TypeA)
	none.Question = nil
	notify := question("cluster.local.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	update := question("cluster.local.", dns.TypeSOA)
	update.Opcode = dns.OpcodeUpdate
	status := question("cluster.local.", dns.TypeSOA)
	status.Opcode = dns.OpcodeStatus
	// A header announcing one question, and a body cut in the middle of it.
	cut := pack(t, question("my-nginx.default.svc.cluster.local.", dns.TypeA))
	cut = cut[:len(cut)-3]

	for _, tc := range []struct {
		name  string
		b     []byte
		rcode int
	}{
		{"two questions", pack(t, two), dns.RcodeFormatError},
		{"no question", pack(t, none), dns.RcodeFormatError},
		{"cut question", cut, dns.RcodeFormatError},
		{"NOTIFY", pack(t, notify), dns.RcodeNotImplemented},
		{"UPDATE", pack(t, update), dns.RcodeNotImplemented},
		{"STATUS", pack(t, status), dns.RcodeNotImplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := rawExchange(t, addr, tc.b, 3*time.Second)
			if r == nil {
				t.Fatal("no answer")
			}
			if r.Rcode != tc.rcode || !r.Response || len(r.Answer) != 0 {
				t.Errorf("rcode %s (response %v, %d answers), want %s", dns.RcodeToString[r.Rcode], r.Response, len(r.Answer), dns.RcodeToString[tc.rcode])
			}
		})
	}
	// Responses and runt packets are dropped without an answer (no reflection).
	resp := question("my-nginx.default.svc.cluster.local.", dns.TypeA)
	resp.Response = true
	for name, b := range map[string][]byte{"response": pack(t, resp), "runt": {0x12, 0x34, 0x01}} {
		if r, _ := rawExchange(t, addr, b, 200*time.Millisecond); r != nil {
			t.Errorf("%s: answered %s", name, dns.RcodeToString[r.Rcode])
		}
	}
	// The server is still serving.
	if r := ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("after malformed queries: rcode %s", dns.RcodeToString[r.Rcode])
	}
	m := s.Metrics()
	// The server counts after writing the answer.
	waitFor(2*time.Second, func() bool {
		return counter(t, m, typeOther, "FORMERR") >= 3 && counter(t, m, "SOA", "NOTIMP") >= 3
	})
	if got := counter(t, m, typeOther, "FORMERR"); got != 3 {
		t.Errorf("FORMERR counted %v times, want 3", got)
	}
	if got := counter(t, m, "SOA", "NOTIMP"); got != 3 {
		t.Errorf("NOTIMP counted %v times, want 3", got)
	}
}

// A UDP query larger than 512 bytes (EDNS0 padding, RFC 7830) is read whole
// and answered, not cut off into a FORMERR.
func TestLargeUDPQuery(t *testing.T) {
	_, addr := start(t, ServerConfig{}, syncedStore())
	q := withEDNS(question("my-nginx.default.svc.cluster.local.", dns.TypeA), 4096, false)
	opt := q.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_PADDING{Padding: make([]byte, 700)})
	if n := len(pack(t, q)); n <= 512 {
		t.Fatalf("query is %d bytes, want over 512", n)
	}
	r := ask(t, "udp", addr, q)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("%d-byte query: rcode %s, %d answers; want NOERROR with 1", len(pack(t, q)), dns.RcodeToString[r.Rcode], len(r.Answer))
	}
}

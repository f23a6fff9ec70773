package zone

import (
	"testing"

	"github.com/miekg/dns"
)

// FuzzAnswer feeds raw packets to the query path: whatever unpacks must be
// answered without a panic, with a reply that packs, or left to the caller with
// no reply. `go test` runs the seed corpus only: every answer test's question,
// with and without EDNS0, and a few malformed packets.
func FuzzAnswer(f *testing.F) {
	v := Build(Config{TTL: 5}, fixture(f))
	for _, c := range answerCases {
		m := question(f, c.q)
		m.Question[0].Name = dns.Fqdn(m.Question[0].Name)
		for _, edns := range []bool{false, true} {
			if edns {
				m.SetEdns0(1232, true)
			}
			b, err := m.Pack()
			if err != nil {
				f.Fatalf("seed %s: %v", c.q, err)
			}
			f.Add(b)
		}
	}
	for _, q := range []string{"example.com. A", "99.99.99.10.in-addr.arpa. PTR", "cluster.local. AXFR"} {
		b, err := question(f, q).Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, 12))
	// A header announcing one question, followed by a compression pointer loop.
	f.Add([]byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1})

	f.Fuzz(func(t *testing.T, data []byte) {
		req := new(dns.Msg)
		if err := req.Unpack(data); err != nil {
			return
		}
		resp, ours := v.Answer(req)
		if !ours {
			if resp != nil {
				t.Fatalf("not ours but a reply: %v", resp)
			}
			return
		}
		if resp == nil || resp.Id != req.Id || !resp.Response {
			t.Fatalf("reply %v to %v: want a response with the request's id", resp, req)
		}
		if _, err := resp.Pack(); err != nil {
			t.Fatalf("reply to %v does not pack: %v\n%v", req.Question, err, resp)
		}
		for _, rr := range append(append(resp.Answer, resp.Ns...), resp.Extra...) {
			if rr.Header().Class != dns.ClassINET {
				t.Fatalf("record %v: class %d, want IN", rr, rr.Header().Class)
			}
		}
	})
}

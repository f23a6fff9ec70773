package difftest

import (
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func mustRR(t *testing.T, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return rr
}

func reply(t *testing.T, q Query, rcode int, answer, ns, extra []string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetReply(q.Msg())
	m.Authoritative = true
	m.Rcode = rcode
	for _, s := range answer {
		m.Answer = append(m.Answer, mustRR(t, s))
	}
	for _, s := range ns {
		m.Ns = append(m.Ns, mustRR(t, s))
	}
	for _, s := range extra {
		m.Extra = append(m.Extra, mustRR(t, s))
	}
	m.SetEdns0(EDNSSize, false) // the OPT last, as servers write it
	return m
}

// TestDiff: order within sections, name case, the SOA serial and the EDNS
// payload size are not differences; rcode, flags, records, TTLs, the
// question's case and a missing OPT are.
func TestDiff(t *testing.T) {
	q := Query{Name: "Hl.alpha.svc.cluster.local.", Type: dns.TypeA}
	soa := func(serial string) string {
		return "cluster.local. 30 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. " + serial + " 7200 1800 86400 30"
	}
	base := func() *dns.Msg {
		return reply(t, q, dns.RcodeSuccess,
			[]string{"hl.alpha.svc.cluster.local. 30 IN A 192.168.1.10", "hl.alpha.svc.cluster.local. 30 IN A 192.168.1.11"},
			nil, []string{"x.cluster.local. 30 IN A 192.168.1.12"})
	}
	tests := []struct {
		name   string
		change func(m *dns.Msg)
		want   []string
	}{
		{"identical", func(*dns.Msg) {}, nil},
		{"answer order", func(m *dns.Msg) { m.Answer[0], m.Answer[1] = m.Answer[1], m.Answer[0] }, nil},
		{"owner case", func(m *dns.Msg) { m.Answer[0].Header().Name = "HL.Alpha.svc.cluster.local." }, nil},
		{"edns size", func(m *dns.Msg) { m.IsEdns0().SetUDPSize(1232) }, nil},
		{"rcode", func(m *dns.Msg) { m.Rcode = dns.RcodeNameError }, []string{FieldRcode}},
		{"aa", func(m *dns.Msg) { m.Authoritative = false }, []string{FieldFlags}},
		{"tc", func(m *dns.Msg) { m.Truncated = true }, []string{FieldFlags}},
		{"question case", func(m *dns.Msg) { m.Question[0].Name = "hl.alpha.svc.cluster.local." }, []string{FieldQuestion}},
		{"no opt", func(m *dns.Msg) { m.Extra = m.Extra[:1] }, []string{FieldEDNS}},
		{"ttl", func(m *dns.Msg) { m.Answer[1].Header().Ttl = 5 }, []string{FieldAnswer}},
		{"missing record", func(m *dns.Msg) { m.Answer = m.Answer[:1] }, []string{FieldAnswer}},
		{"duplicate record", func(m *dns.Msg) { m.Answer = append(m.Answer, m.Answer[0]) }, []string{FieldAnswer}},
		{"authority", func(m *dns.Msg) { m.Ns = []dns.RR{mustRR(t, soa("1"))} }, []string{FieldAuthority}},
		{"additional", func(m *dns.Msg) { m.Extra[0].(*dns.A).A[3] = 13 }, []string{FieldAdditional}},
		{"rcode and answer", func(m *dns.Msg) { m.Rcode, m.Answer = dns.RcodeNameError, nil }, []string{FieldRcode, FieldAnswer}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.change(b)
			got := Diff(Canonicalize(a), Canonicalize(b))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Diff = %v, want %v\nA: %+v\nB: %+v", got, tc.want, Canonicalize(a), Canonicalize(b))
			}
		})
	}

	// The SOA serial is ignored; its other fields are not.
	a := reply(t, q, dns.RcodeNameError, nil, []string{soa("1700000000")}, nil)
	b := reply(t, q, dns.RcodeNameError, nil, []string{soa("42")}, nil)
	if d := Diff(Canonicalize(a), Canonicalize(b)); len(d) != 0 {
		t.Errorf("SOA serial: Diff = %v, want none", d)
	}
	b.Ns[0].(*dns.SOA).Minttl = 5
	if d := Diff(Canonicalize(a), Canonicalize(b)); !slices.Equal(d, []string{FieldAuthority}) {
		t.Errorf("SOA minimum: Diff = %v, want [authority]", d)
	}
}

func TestCanonicalize(t *testing.T) {
	q := Query{Name: "_HTTP._tcp.Web.alpha.svc.cluster.local.", Type: dns.TypeSRV}
	m := reply(t, q, dns.RcodeSuccess,
		[]string{"_HTTP._tcp.Web.alpha.svc.cluster.local. 30 IN SRV 0 100 80 Web.Alpha.svc.cluster.local."},
		nil, []string{"Web.Alpha.svc.cluster.local. 30 IN A 10.96.10.1"})
	c := Canonicalize(m)
	want := Canon{
		Rcode: "NOERROR", Flags: "aa rd", Question: "_HTTP._tcp.Web.alpha.svc.cluster.local. IN SRV", EDNS: "v0",
		Answer:     []string{"_http._tcp.web.alpha.svc.cluster.local. 30 IN SRV 0 100 80 web.alpha.svc.cluster.local."},
		Authority:  []string{},
		Additional: []string{"web.alpha.svc.cluster.local. 30 IN A 10.96.10.1"},
	}
	if Diff(c, want) != nil || c.Rcode != want.Rcode {
		t.Errorf("Canonicalize =\n%+v\nwant\n%+v", c, want)
	}
}

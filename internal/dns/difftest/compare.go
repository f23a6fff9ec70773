package difftest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Fields of a response that Diff compares, by name (the names differences.md
// uses in its `fields:` lines).
const (
	FieldRcode      = "rcode"
	FieldFlags      = "flags"
	FieldQuestion   = "question"
	FieldEDNS       = "edns"
	FieldAnswer     = "answer"
	FieldAuthority  = "authority"
	FieldAdditional = "additional"
)

// AllFields lists every field Diff compares, in its order.
var AllFields = []string{FieldRcode, FieldFlags, FieldQuestion, FieldEDNS, FieldAnswer, FieldAuthority, FieldAdditional}

// Canon is the comparable content of a response:
//   - Rcode: the mnemonic (extended rcodes included);
//   - Flags: the header bits aa, tc, rd, ra, ad, cd that are set, in that order;
//   - Question: the question section as sent back (case preserved: a resolver
//     may check it, RFC 5452 §9.1 / 0x20);
//   - EDNS: "none" or "v<version>" plus " do" when the DO bit is set; the UDP
//     payload size is configuration and is not compared;
//   - Answer, Authority, Additional: each record as presentation text, with
//     owner names and domain names in RDATA lower-cased (names compare
//     case-insensitively, RFC 4343 §3), the SOA serial set to 0 (each server
//     derives it from its own clock), the OPT record left out (it is EDNS), and
//     sorted (order within a section carries no meaning here).
type Canon struct {
	Rcode, Flags, Question, EDNS  string
	Answer, Authority, Additional []string
}

// Canonicalize reduces m to its Canon.
func Canonicalize(m *dns.Msg) Canon {
	c := Canon{Rcode: dns.RcodeToString[m.Rcode], EDNS: "none"}
	if c.Rcode == "" {
		c.Rcode = fmt.Sprintf("RCODE%d", m.Rcode)
	}
	var flags []string
	for _, f := range []struct {
		set  bool
		name string
	}{{m.Authoritative, "aa"}, {m.Truncated, "tc"}, {m.RecursionDesired, "rd"}, {m.RecursionAvailable, "ra"}, {m.AuthenticatedData, "ad"}, {m.CheckingDisabled, "cd"}} {
		if f.set {
			flags = append(flags, f.name)
		}
	}
	c.Flags = strings.Join(flags, " ")
	var qs []string
	for _, q := range m.Question {
		qs = append(qs, q.Name+" "+dns.ClassToString[q.Qclass]+" "+dns.TypeToString[q.Qtype])
	}
	c.Question = strings.Join(qs, "; ")
	if opt := m.IsEdns0(); opt != nil {
		c.EDNS = fmt.Sprintf("v%d", opt.Version())
		if opt.Do() {
			c.EDNS += " do"
		}
	}
	c.Answer = canonRRs(m.Answer)
	c.Authority = canonRRs(m.Ns)
	c.Additional = canonRRs(m.Extra)
	return c
}

func canonRRs(rrs []dns.RR) []string {
	out := []string{}
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, canonRR(rr))
	}
	slices.Sort(out)
	return out
}

// canonRR is the presentation text of rr with its names lower-cased and an SOA
// serial of 0; fields are separated by single spaces.
func canonRR(rr dns.RR) string {
	rr = dns.Copy(rr)
	h := rr.Header()
	h.Name = strings.ToLower(h.Name)
	switch r := rr.(type) {
	case *dns.CNAME:
		r.Target = strings.ToLower(r.Target)
	case *dns.PTR:
		r.Ptr = strings.ToLower(r.Ptr)
	case *dns.SRV:
		r.Target = strings.ToLower(r.Target)
	case *dns.NS:
		r.Ns = strings.ToLower(r.Ns)
	case *dns.MX:
		r.Mx = strings.ToLower(r.Mx)
	case *dns.DNAME:
		r.Target = strings.ToLower(r.Target)
	case *dns.SOA:
		r.Ns, r.Mbox, r.Serial = strings.ToLower(r.Ns), strings.ToLower(r.Mbox), 0
	}
	return strings.Join(strings.Fields(rr.String()), " ")
}

// Diff returns the fields (in AllFields order) in which a and b differ.
func Diff(a, b Canon) []string {
	var out []string
	add := func(name string, equal bool) {
		if !equal {
			out = append(out, name)
		}
	}
	add(FieldRcode, a.Rcode == b.Rcode)
	add(FieldFlags, a.Flags == b.Flags)
	add(FieldQuestion, a.Question == b.Question)
	add(FieldEDNS, a.EDNS == b.EDNS)
	add(FieldAnswer, slices.Equal(a.Answer, b.Answer))
	add(FieldAuthority, slices.Equal(a.Authority, b.Authority))
	add(FieldAdditional, slices.Equal(a.Additional, b.Additional))
	return out
}

// Field returns the text of one field of c, for reports.
func (c Canon) Field(name string) string {
	switch name {
	case FieldRcode:
		return c.Rcode
	case FieldFlags:
		return "[" + c.Flags + "]"
	case FieldQuestion:
		return c.Question
	case FieldEDNS:
		return c.EDNS
	case FieldAnswer:
		return section(c.Answer)
	case FieldAuthority:
		return section(c.Authority)
	case FieldAdditional:
		return section(c.Additional)
	}
	return "?"
}

func section(rrs []string) string {
	if len(rrs) == 0 {
		return "(empty)"
	}
	return "\n\t\t" + strings.Join(rrs, "\n\t\t")
}

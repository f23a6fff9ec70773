package zone

import (
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// maxChase bounds the CNAME steps followed inside the zone (CoreDNS: 8).
const maxChase = 8

// result is what one name holds for one question type.
type result struct {
	exists bool // false: NXDOMAIN
	answer []dns.RR
	extra  []dns.RR
	// cname, when set, is the target of the CNAME that answer ends with, to be
	// followed for the type asked.
	cname string
	// negative is set by chase when the last name followed has no record of the
	// type asked: the reply then carries the SOA (RFC 2308 2.1, 2.2).
	negative bool
}

// notFound is the result of a name that does not exist.
var notFound = result{}

// nodata is the result of a name that exists with nothing of the type asked.
var nodata = result{exists: true}

// Answer returns the reply to req.
//
// ours is false, and resp nil, when the question is outside the cluster zone and
// is not the reverse name of an address the View knows: the caller forwards it or
// answers REFUSED (a reverse name the View does not know is left to the upstreams,
// as CoreDNS's "fallthrough in-addr.arpa ip6.arpa" does).
//
// When ours is true, resp is the complete authoritative reply: the ID, opcode, RD
// and CD bits and the question of req (the question's name made fully qualified),
// AA set, rcode NOERROR or NXDOMAIN, the answer section (owner names in the
// question's case), the zone's SOA in the authority section of a negative answer,
// and the targets' addresses in the additional section of SRV and NS answers. It
// carries no OPT record and is not truncated: the server does both. Malformed
// requests get FORMERR (not exactly one question), NOTIMP (opcode not QUERY) or
// REFUSED (class not IN or ANY, or a zone transfer), with ours true. A nil req
// gives (nil, false).
func (v *View) Answer(req *dns.Msg) (resp *dns.Msg, ours bool) {
	if req == nil {
		return nil, false
	}
	resp = new(dns.Msg)
	resp.SetReply(req)
	if req.Opcode != dns.OpcodeQuery {
		resp.Rcode = dns.RcodeNotImplemented
		return resp, true
	}
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		return resp, true
	}
	q := &resp.Question[0]
	q.Name = dns.Fqdn(q.Name)
	labels := dns.SplitDomainName(strings.ToLower(q.Name))

	var r result
	var soaZone string
	if rel, ok := v.relative(labels); ok {
		if refuse(q) {
			resp.Rcode = dns.RcodeRefused
			return resp, true
		}
		soaZone = v.zone
		r = v.chase(q.Name, rel, q.Qtype)
	} else {
		rz, targets := v.reverse(labels)
		if targets.first == "" {
			return nil, false
		}
		if refuse(q) {
			resp.Rcode = dns.RcodeRefused
			return resp, true
		}
		soaZone = rz
		r = v.ptr(q.Name, q.Qtype, targets)
	}
	resp.Authoritative = true
	resp.Compress = true
	resp.Answer, resp.Extra = r.answer, r.extra
	if !r.exists {
		resp.Rcode = dns.RcodeNameError
	}
	if !r.exists || r.negative {
		resp.Ns = []dns.RR{v.soa(soaZone, soaZone)}
	}
	return resp, true
}

// refuse reports questions the View will not answer though the name is its own:
// a class other than IN (or ANY), and zone transfers, which it does not offer.
func refuse(q *dns.Question) bool {
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		return true
	}
	return q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR
}

// relative returns the labels of a name in the cluster zone that precede the
// zone's own; ok is false for a name outside it. labels are lower case.
func (v *View) relative(labels []string) (rel []string, ok bool) {
	n, z := len(labels), len(v.zoneLabels)
	if n < z {
		return nil, false
	}
	for i := range z {
		if labels[n-z+i] != v.zoneLabels[i] {
			return nil, false
		}
	}
	return labels[:n-z], true
}

// chase answers owner (relative labels rel) and follows, for the type asked, the
// CNAMEs of ExternalName Services that point back into the zone, at most maxChase
// steps and never twice through one name. The returned result merges the steps'
// records; its exists and emptiness are those of the last step (RFC 6604), and it
// exists whenever the chain leaves the zone or loops.
func (v *View) chase(owner string, rel []string, qtype uint16) result {
	var out result
	seen := []string{strings.ToLower(owner)}
	for step := 0; ; step++ {
		r := v.forward(owner, rel, qtype)
		out.answer = append(out.answer, r.answer...)
		out.extra = append(out.extra, r.extra...)
		out.exists, out.negative = r.exists, len(r.answer) == 0
		if r.cname == "" || step == maxChase {
			return out
		}
		target := strings.ToLower(r.cname)
		next, in := v.relative(dns.SplitDomainName(target))
		if !in || slices.Contains(seen, target) {
			return out
		}
		seen = append(seen, target)
		owner, rel = r.cname, next
	}
}

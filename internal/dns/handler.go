package dns

import (
	"net"
	"time"

	"github.com/miekg/dns"
)

// ServeDNS answers one query (it is the dns.Handler of both listeners):
//   - opcode other than QUERY: NOTIMP; not exactly one question, or more
//     than one OPT record, or an OPT not owned by the root: FORMERR; EDNS
//     version other than 0: BADVERS;
//   - a question in the zone: the zone's answer, or SERVFAIL before the
//     source has synced;
//   - any other question: the upstreams' answer (SERVFAIL when none
//     answers), or REFUSED when there are no upstreams.
//
// Every answer then goes through finish (EDNS0 and truncation), is counted in
// the metrics, and is written.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	resp := s.answer(req)
	finish(req, resp, udp)
	// Counted before the write, so a client that has its answer finds it in
	// the metrics (the duration is the answer's, not the socket write's).
	t := typeOther
	if len(req.Question) == 1 {
		t = typeLabel(req.Question[0].Qtype)
	}
	s.metrics.Requests.WithLabelValues(t, rcodeLabel(resp.Rcode)).Inc()
	s.metrics.RequestDuration.Observe(time.Since(start).Seconds())
	if err := w.WriteMsg(resp); err != nil {
		s.log.V(2).Info("Cannot write DNS answer", "client", w.RemoteAddr().String(), "error", err)
	}
	if v := s.log.V(5); v.Enabled() {
		v.Info("Answered", "client", w.RemoteAddr().String(), "question", questionString(req),
			"rcode", rcodeLabel(resp.Rcode), "answers", len(resp.Answer), "truncated", resp.Truncated)
	}
}

// answer returns the reply to req before EDNS0 and truncation handling.
func (s *Server) answer(req *dns.Msg) *dns.Msg {
	if req.Opcode != dns.OpcodeQuery {
		return new(dns.Msg).SetRcode(req, dns.RcodeNotImplemented)
	}
	if len(req.Question) != 1 {
		return new(dns.Msg).SetRcodeFormatError(req)
	}
	opt, ok := requestOPT(req)
	if !ok {
		return new(dns.Msg).SetRcodeFormatError(req)
	}
	if opt != nil && opt.Version() != 0 {
		return new(dns.Msg).SetRcode(req, dns.RcodeBadVers)
	}
	if v := s.view.Load(); v != nil {
		if resp, ours := v.Answer(req); ours {
			return s.resolveExternal(req, resp)
		}
	} else if _, ours := s.outside.Answer(req); ours {
		return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
	}
	ups := s.fwd.Load().route(dns.CanonicalName(req.Question[0].Name))
	if len(ups) == 0 {
		return new(dns.Msg).SetRcode(req, dns.RcodeRefused)
	}
	resp, err := s.forwarder.forward(s.baseCtx, req, ups)
	if err != nil {
		s.log.V(2).Info("Forwarding failed", "question", questionString(req), "error", err)
		return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
	}
	return resp
}

// requestOPT returns req's OPT record (nil without one); ok is false when the
// request carries several, or one not owned by the root (RFC 6891 6.1.1).
func requestOPT(req *dns.Msg) (opt *dns.OPT, ok bool) {
	for _, rr := range req.Extra {
		o, isOPT := rr.(*dns.OPT)
		if !isOPT {
			continue
		}
		if opt != nil || o.Hdr.Name != "." {
			return nil, false
		}
		opt = o
	}
	return opt, true
}

// finish makes resp the answer to req on the wire:
//   - its ID is req's, and any OPT record it carries is replaced: when req
//     has a valid OPT, the answer has one of version 0 with req's DO bit and
//     UDP size (at least 512), and no options;
//   - without an OPT in req, an extended rcode cannot be sent: it becomes
//     SERVFAIL;
//   - over UDP it is truncated (TC set, records dropped from the end) to
//     req's UDP size, 512 without EDNS0; over TCP to the 65535 bytes a TCP
//     message can hold.
func finish(req, resp *dns.Msg, udp bool) {
	resp.Id = req.Id
	extra := make([]dns.RR, 0, len(resp.Extra)+1)
	for _, rr := range resp.Extra {
		if _, isOPT := rr.(*dns.OPT); !isOPT {
			extra = append(extra, rr)
		}
	}
	resp.Extra = extra
	size := dns.MaxMsgSize
	if udp {
		size = dns.MinMsgSize
	}
	if opt, ok := requestOPT(req); ok && opt != nil {
		clientSize := max(opt.UDPSize(), dns.MinMsgSize)
		if udp {
			size = int(clientSize)
		}
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(clientSize)
		o.SetDo(opt.Do())
		resp.Extra = append(resp.Extra, o)
	} else if resp.Rcode > 0xF {
		resp.Rcode = dns.RcodeServerFailure
	}
	resp.Truncate(size)
	resp.Compress = true
}

// questionString renders req's first question for logs.
func questionString(req *dns.Msg) string {
	if len(req.Question) == 0 {
		return ""
	}
	q := req.Question[0]
	return q.Name + " " + dns.TypeToString[q.Qtype]
}

// resolveExternal completes an answer that ends with a CNAME to a name
// outside the zone (an ExternalName Service's) as a recursive server does,
// and as CoreDNS and kube-dns do: the target is asked, for the type asked,
// where forwarding sends it (a stub domain or the upstreams), and the records
// it gets are appended after the CNAME, with the target's rcode (RFC 6604).
// Without upstreams for the target, or when none answers, the answer stays
// the CNAME alone. A CNAME or ANY question is answered as it is.
func (s *Server) resolveExternal(req, resp *dns.Msg) *dns.Msg {
	qtype := req.Question[0].Qtype
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 || qtype == dns.TypeCNAME || qtype == dns.TypeANY {
		return resp
	}
	cname, ok := resp.Answer[len(resp.Answer)-1].(*dns.CNAME)
	if !ok {
		return resp
	}
	target := dns.CanonicalName(cname.Target)
	if dns.IsSubDomain(dns.CanonicalName(s.cfg.Zone), target) {
		return resp // a chain inside the zone that the zone ended (a loop)
	}
	ups := s.fwd.Load().route(target)
	if len(ups) == 0 {
		return resp
	}
	q := new(dns.Msg)
	q.Id = req.Id
	q.RecursionDesired = true
	q.Question = []dns.Question{{Name: cname.Target, Qtype: qtype, Qclass: dns.ClassINET}}
	r, err := s.forwarder.forward(s.baseCtx, q, ups)
	if err != nil {
		s.log.V(2).Info("Resolving an external name failed", "question", questionString(req), "target", cname.Target, "error", err)
		return resp
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return resp
	}
	resp.Answer = append(resp.Answer, r.Answer...)
	resp.Rcode = r.Rcode
	resp.RecursionAvailable = true
	return resp
}

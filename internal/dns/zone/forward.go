package zone

import (
	"net/netip"

	"github.com/miekg/dns"
)

// forward answers a name of the cluster zone. owner is the name as asked (it
// becomes the owner of the answer records); rel are its lower-case labels before
// the zone's. The grammar, as CoreDNS parses it, from the right:
//
//	<zone>                               SOA, NS
//	dns-version.<zone>                   TXT
//	ns.dns.<zone>                        A/AAAA of the nameserver
//	svc.<zone>, pod.<zone>               exist, empty
//	<ns>.svc.<zone>                      exists when <ns> holds a Service
//	<svc>.<ns>.svc.<zone>                the Service
//	<hostname>.<svc>.<ns>.svc.<zone>     its endpoints with that hostname
//	<port>.<proto>.<svc>.<ns>.svc.<zone> its ports named so ("_" prefixes optional)
//	<ns>.pod.<zone>                      exists, empty
//	<dashed-ip>.<ns>.pod.<zone>          A/AAAA of the IP
//
// Anything else is NXDOMAIN.
func (v *View) forward(owner string, rel []string, qtype uint16) result {
	n := len(rel)
	if n == 0 {
		return v.apex(owner, qtype)
	}
	switch rel[n-1] {
	case "svc":
		return v.svc(owner, rel[:n-1], qtype)
	case "pod":
		return v.pod(owner, rel[:n-1], qtype)
	case "dns-version":
		if n != 1 {
			return notFound
		}
		if qtype != dns.TypeTXT {
			return nodata
		}
		return result{exists: true, answer: []dns.RR{&dns.TXT{Hdr: hdr(owner, dns.TypeTXT, versionTTL), Txt: []string{SchemaVersion}}}}
	case "dns":
		if n != 2 || rel[0] != "ns" {
			return notFound
		}
		return result{exists: true, answer: v.addrRecords(owner, qtype, v.nsAddrs)}
	}
	return notFound
}

// apex answers the zone's own name: its SOA and NS; no address (CoreDNS's apex.dns
// convention holds nothing here).
func (v *View) apex(owner string, qtype uint16) result {
	switch qtype {
	case dns.TypeSOA:
		return result{exists: true, answer: []dns.RR{v.soa(owner, v.zone)}}
	case dns.TypeNS:
		return result{
			exists: true,
			answer: []dns.RR{&dns.NS{Hdr: hdr(owner, dns.TypeNS, v.ttl), Ns: v.nsTarget}},
			extra:  append(v.addrRecords(v.nsTarget, dns.TypeA, v.nsAddrs), v.addrRecords(v.nsTarget, dns.TypeAAAA, v.nsAddrs)...),
		}
	}
	return nodata
}

// svc answers names under svc.<zone>; rel are the labels before "svc".
func (v *View) svc(owner string, rel []string, qtype uint16) result {
	m := len(rel)
	if m == 0 {
		return nodata
	}
	if m == 1 {
		if _, ok := v.namespaces.Lookup(rel[0]); ok {
			return nodata
		}
		return notFound
	}
	s := v.services.Get(svcKey{ns: rel[m-1], name: rel[m-2]})
	if s == nil {
		return notFound
	}
	var q query
	switch m {
	case 2:
	case 3:
		q.endpoint = rel[0]
	case 4:
		q.port, q.proto = stripUnderscore(rel[0]), stripUnderscore(rel[1])
	default:
		return notFound
	}
	if s.kind == kindExternalName {
		if m != 2 {
			return notFound
		}
		return v.external(owner, s, qtype)
	}
	ts, found := s.targets(q)
	if !found {
		return notFound
	}
	return v.render(owner, qtype, ts)
}

// external answers an ExternalName Service: its CNAME whatever the type (the name
// holds nothing else, RFC 1034 3.6.2), to be followed unless CNAME was asked.
func (v *View) external(owner string, s *service, qtype uint16) result {
	if s.external == "" {
		return nodata
	}
	r := result{exists: true, answer: []dns.RR{&dns.CNAME{Hdr: hdr(owner, dns.TypeCNAME, v.ttl), Target: s.external}}}
	if qtype != dns.TypeCNAME {
		r.cname = s.external
	}
	return r
}

// pod answers names under pod.<zone> without looking for the Pod ("pods
// insecure"); rel are the labels before "pod".
func (v *View) pod(owner string, rel []string, qtype uint16) result {
	switch len(rel) {
	case 0, 1:
		return nodata
	case 2:
		ip, ok := podIP(rel[0])
		if !ok {
			return notFound
		}
		return result{exists: true, answer: v.addrRecords(owner, qtype, []netip.Addr{ip})}
	}
	return notFound
}

// stripUnderscore removes one leading "_".
func stripUnderscore(s string) string {
	if len(s) > 0 && s[0] == '_' {
		return s[1:]
	}
	return s
}

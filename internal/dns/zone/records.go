package zone

import (
	"net/netip"

	"github.com/miekg/dns"
)

// hdr is the header of a class IN record.
func hdr(owner string, rrtype uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: owner, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
}

// soa returns the SOA of zone (the cluster zone or a reverse zone) owned by owner,
// with CoreDNS's fields: mname ns.dns.<zone>, rname hostmaster.<zone>, the
// snapshot's revision as serial, refresh 7200, retry 1800, expire 86400, minimum
// the TTL; its own TTL is min(TTL, 300).
func (v *View) soa(owner, zone string) *dns.SOA {
	return &dns.SOA{
		Hdr:     hdr(owner, dns.TypeSOA, min(v.ttl, maxSOATTL)),
		Ns:      "ns.dns." + zone,
		Mbox:    "hostmaster." + zone,
		Serial:  v.serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  v.ttl,
	}
}

// addrRecords returns owner's A records for the IPv4 addresses of addrs when qtype
// is A, its AAAA records for the IPv6 ones when qtype is AAAA, and nil for any
// other type. Addresses are unmapped; duplicates give one record.
func (v *View) addrRecords(owner string, qtype uint16, addrs []netip.Addr) []dns.RR {
	if qtype != dns.TypeA && qtype != dns.TypeAAAA {
		return nil
	}
	var out []dns.RR
	for i, a := range addrs {
		if rr := v.addrRecord(owner, qtype, a); rr != nil && !seenAddr(addrs[:i], a) {
			out = append(out, rr)
		}
	}
	return out
}

// addrRecord returns owner's A or AAAA record (qtype) for a, or nil when a is of
// the other family.
func (v *View) addrRecord(owner string, qtype uint16, a netip.Addr) dns.RR {
	a = a.Unmap()
	switch {
	case qtype == dns.TypeA && a.Is4():
		b := a.As4()
		return &dns.A{Hdr: hdr(owner, dns.TypeA, v.ttl), A: b[:]}
	case qtype == dns.TypeAAAA && a.Is6():
		b := a.As16()
		return &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, v.ttl), AAAA: b[:]}
	}
	return nil
}

// seenAddr reports whether a is in list (short lists: address records of one name).
func seenAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if b.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

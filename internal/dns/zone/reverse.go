package zone

import (
	"net/netip"

	"github.com/miekg/dns"
)

// The reverse zones the View answers PTR questions in.
const (
	reverse4 = "in-addr.arpa."
	reverse6 = "ip6.arpa."
)

var reverseZones = []string{reverse4, reverse6}

// reverse returns, for the lower-case labels of a reverse name of one whole
// address, the reverse zone and the PTR targets the View holds for that address:
// the Service that has it as a ClusterIP, else every <hostname>.<svc>.<ns>.svc.<zone>
// of a published endpoint with it. No targets (first ""): not the View's name.
func (v *View) reverse(labels []string) (zone string, targets ptrTargets) {
	ip, zone, ok := reverseAddr(labels)
	if !ok {
		return "", targets
	}
	if t, ok := v.ptrService.get(ip); ok {
		return zone, ptrTargets{first: t}
	}
	pt, _ := v.ptrEndpoint.get(ip)
	return zone, pt
}

// ptr answers a reverse name the View holds: its PTR records, or NODATA for any
// other type.
func (v *View) ptr(owner string, qtype uint16, targets ptrTargets) result {
	if qtype != dns.TypePTR {
		return result{exists: true, negative: true}
	}
	r := result{exists: true, answer: make([]dns.RR, 0, 1+len(targets.more))}
	for _, t := range append([]string{targets.first}, targets.more...) {
		r.answer = append(r.answer, &dns.PTR{Hdr: hdr(owner, dns.TypePTR, v.ttl), Ptr: t})
	}
	return r
}

// reverseAddr parses d.c.b.a.in-addr.arpa (four decimal labels 0-255 without
// leading zeros) or the 32 one-nibble labels of an ip6.arpa name. An IPv4-mapped
// IPv6 address is returned as its IPv4 address.
func reverseAddr(labels []string) (ip netip.Addr, zone string, ok bool) {
	n := len(labels)
	switch {
	case n == 6 && labels[4] == "in-addr" && labels[5] == "arpa":
		var b [4]byte
		for i := range 4 {
			o, ok := octet(labels[3-i])
			if !ok {
				return ip, "", false
			}
			b[i] = o
		}
		return netip.AddrFrom4(b), reverse4, true
	case n == 34 && labels[32] == "ip6" && labels[33] == "arpa":
		var b [16]byte
		for i := range 32 {
			x, ok := nibble(labels[31-i])
			if !ok {
				return ip, "", false
			}
			b[i/2] |= x << (4 * (1 - i%2))
		}
		return netip.AddrFrom16(b).Unmap(), reverse6, true
	}
	return ip, "", false
}

// octet parses a decimal 0-255 without leading zeros.
func octet(s string) (byte, bool) {
	if len(s) == 0 || len(s) > 3 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > 255 {
		return 0, false
	}
	return byte(n), true
}

// nibble parses one lower-case hex digit.
func nibble(s string) (byte, bool) {
	if len(s) != 1 {
		return 0, false
	}
	switch c := s[0]; {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

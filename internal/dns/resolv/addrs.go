package resolv

import (
	"context"
	"net/netip"

	"github.com/miekg/dns"
)

// TypeAddrs is NotFoundError.Type for an address lookup (A and AAAA); it is
// no record type (type 0 is reserved).
const TypeAddrs uint16 = 0

// LookupAddrs returns name's addresses as getaddrinfo with AF_UNSPEC finds
// them through glibc's DNS backend: the names of c.Candidates are tried in
// order, each asked for A and then AAAA records, and the first name with any
// address answers, its IPv4 addresses first, each family in answer order. A
// name answered NXDOMAIN for A is not asked for AAAA (it does not exist).
// NXDOMAIN, NODATA (an answer without addresses: no records, or only a
// CNAME the server did not follow) and failures move on to the next name;
// when none has an address the error is a *NotFoundError (Type TypeAddrs)
// naming each name tried. LookupAddrs stops when ctx ends.
func (c Config) LookupAddrs(ctx context.Context, name string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	err := c.search(ctx, name, TypeAddrs, func(cand string) (bool, Attempt) {
		a, err := c.Query(ctx, cand, dns.TypeA)
		if err != nil {
			return false, Attempt{Name: cand, Rcode: -1, Err: err}
		}
		if a.Rcode == dns.RcodeNameError {
			return false, Attempt{Name: cand, Rcode: a.Rcode}
		}
		aaaa, err := c.Query(ctx, cand, dns.TypeAAAA)
		if addrs = append(answerAddrs(a), answerAddrs(aaaa)...); len(addrs) > 0 {
			return true, Attempt{}
		}
		switch {
		case a.Rcode != dns.RcodeSuccess:
			return false, Attempt{Name: cand, Rcode: a.Rcode}
		case err != nil:
			return false, Attempt{Name: cand, Rcode: -1, Err: err}
		case aaaa.Rcode != dns.RcodeSuccess:
			return false, Attempt{Name: cand, Rcode: aaaa.Rcode}
		}
		return false, Attempt{Name: cand, Rcode: dns.RcodeSuccess, NoData: true}
	})
	if err != nil {
		return nil, err
	}
	return addrs, nil
}

// answerAddrs returns the addresses of r's A and AAAA answer records (none
// for a nil r).
func answerAddrs(r *dns.Msg) []netip.Addr {
	if r == nil {
		return nil
	}
	var out []netip.Addr
	for _, rr := range r.Answer {
		switch rec := rr.(type) {
		case *dns.A:
			if a, ok := netip.AddrFromSlice(rec.A); ok {
				out = append(out, a.Unmap())
			}
		case *dns.AAAA:
			if a, ok := netip.AddrFromSlice(rec.AAAA); ok {
				out = append(out, a)
			}
		}
	}
	return out
}

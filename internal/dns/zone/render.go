package zone

import (
	"math"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// query is what a name under a Service asks for; "" fields ask for any.
type query struct {
	endpoint    string // hostname label of <hostname>.<svc>...
	port, proto string // from <port>.<proto>.<svc>..., underscores stripped
}

// target is one (address, port) a Service answers with, and the name an SRV
// record points to for it ("" when that name is too long to exist).
type target struct {
	addr netip.Addr
	port int32 // -1: no port (gives no SRV)
	name string
}

// targets lists what s answers q with, as CoreDNS's findServices does: for a
// ClusterIP Service asked without an endpoint label, every ClusterIP for every
// matching Service port; otherwise every published endpoint address (with the
// asked hostname) for every matching port of its slice. found is false when the
// name does not exist: no port matches, or (endpoints) no address does. A ClusterIP
// Service asked by its bare name always exists, ports or not (spec 2.3.1).
func (s *service) targets(q query) (ts []target, found bool) {
	unconstrained := q.port == "" && q.proto == ""
	if s.kind == kindClusterIP && q.endpoint == "" {
		if len(s.ports) == 0 && unconstrained {
			for _, ip := range s.ips {
				ts = append(ts, target{addr: ip, port: -1, name: s.fqdn})
			}
			return ts, true
		}
		for _, p := range s.ports {
			if !portMatches(q, p.Name, p.Protocol) {
				continue
			}
			found = true
			for _, ip := range s.ips {
				ts = append(ts, target{addr: ip, port: p.Port, name: s.fqdn})
			}
		}
		return ts, found
	}
	for i := range s.slices {
		sl := &s.slices[i]
		for _, a := range sl.addrs {
			if q.endpoint != "" && q.endpoint != a.host {
				continue
			}
			// A slice without ports stands for one port without name or
			// protocol (CoreDNS's sentinel): it matches a question naming
			// neither, and gives no SRV record.
			if len(sl.ports) == 0 && unconstrained {
				found = true
				ts = append(ts, target{addr: a.addr, port: -1, name: a.target})
			}
			for _, p := range sl.ports {
				if portMatches(q, p.Name, p.Protocol) {
					found = true
					ts = append(ts, target{addr: a.addr, port: p.Port, name: a.target})
				}
			}
		}
	}
	return ts, found
}

// render answers owner, an existing name, with ts for qtype: A/AAAA records of the
// distinct addresses, SRV records (with the targets' addresses as additional
// records), or nothing for any other type.
func (v *View) render(owner string, qtype uint16, ts []target) result {
	r := result{exists: true}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA:
		var seen map[netip.Addr]struct{} // for long lists; short ones are scanned
		if len(ts) > 16 {
			seen = make(map[netip.Addr]struct{}, len(ts))
		}
		for i, t := range ts {
			if seen != nil {
				if _, dup := seen[t.addr]; dup {
					continue
				}
				seen[t.addr] = struct{}{}
			} else if slices.ContainsFunc(ts[:i], func(u target) bool { return u.addr == t.addr }) {
				continue
			}
			if rr := v.addrRecord(owner, qtype, t.addr); rr != nil {
				r.answer = append(r.answer, rr)
			}
		}
	case dns.TypeSRV:
		r.answer, r.extra = v.srv(owner, ts)
	}
	return r
}

// srv returns the SRV records of owner for ts and the targets' address records,
// as CoreDNS does: priority 0, every record the same weight (100 shared among all
// of ts, at least 1), one record per distinct (target, port), one address record
// per distinct (target, address); targets without a port or a name are skipped.
func (v *View) srv(owner string, ts []target) (answer, extra []dns.RR) {
	weight := srvWeight(len(ts))
	type srvKey struct {
		name string
		port int32
	}
	type addrKey struct {
		name string
		addr netip.Addr
	}
	seenSRV := map[srvKey]struct{}{}
	seenAddr := map[addrKey]struct{}{}
	for _, t := range ts {
		if t.port < 0 || t.port > math.MaxUint16 || t.name == "" {
			continue
		}
		if _, dup := seenSRV[srvKey{t.name, t.port}]; !dup {
			seenSRV[srvKey{t.name, t.port}] = struct{}{}
			answer = append(answer, &dns.SRV{
				Hdr: hdr(owner, dns.TypeSRV, v.ttl), Priority: 0, Weight: weight,
				Port: uint16(t.port), Target: t.name,
			})
		}
		if _, dup := seenAddr[addrKey{t.name, t.addr}]; !dup {
			seenAddr[addrKey{t.name, t.addr}] = struct{}{}
			qtype := dns.TypeA
			if t.addr.Is6() {
				qtype = dns.TypeAAAA
			}
			if rr := v.addrRecord(t.name, qtype, t.addr); rr != nil {
				extra = append(extra, rr)
			}
		}
	}
	return answer, extra
}

// srvWeight is CoreDNS's weight for each of n records of one priority: the
// floor of 100/n, computed as it does, and at least 1.
func srvWeight(n int) uint16 {
	if n <= 0 {
		return 100
	}
	w := math.Floor(100.0 / float64(100*n) * 100)
	if w < 1 {
		return 1
	}
	if w > math.MaxUint16 {
		return math.MaxUint16
	}
	return uint16(w)
}

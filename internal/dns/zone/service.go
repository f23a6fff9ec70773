package zone

import (
	"bytes"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/model"
)

// tolerateUnreadyAnnotation is the annotation the spec (2.1 "ready") still names
// as publishing not-ready endpoints; publishNotReadyAddresses replaced it.
const tolerateUnreadyAnnotation = "service.alpha.kubernetes.io/tolerate-unready-endpoints"

// kind is how a Service is answered.
type kind uint8

const (
	kindClusterIP    kind = iota // A/AAAA of its ClusterIPs (none while unallocated)
	kindHeadless                 // A/AAAA of its published endpoints
	kindExternalName             // CNAME to its external name
)

// svcKey is a Service's namespace and name, lower case.
type svcKey struct{ ns, name string }

// service is one Service as the View answers it.
type service struct {
	kind kind
	fqdn string // <name>.<ns>.svc.<zone>, lower case
	// ips are the ClusterIPs, unmapped (kindClusterIP).
	ips []netip.Addr
	// ports are spec.ports (kindClusterIP); slices the published endpoints of
	// every kind but kindExternalName, which endpoint-name queries use. Ports are
	// shared with the model, which is immutable.
	ports  []model.ServicePort
	slices []epSlice
	// external is the ExternalName, fully qualified; "" when it is not a usable
	// domain name (kindExternalName).
	external string
}

// portMatches reports whether a port named name with protocol proto answers q's
// port and protocol ("" in q meaning any).
func portMatches(q query, name string, proto model.Protocol) bool {
	return (q.port == "" || strings.EqualFold(q.port, name)) &&
		(q.proto == "" || strings.EqualFold(q.proto, string(proto)))
}

// epSlice is the published part of one EndpointSlice; ports are the slice's.
type epSlice struct {
	ports []model.EndpointPort
	addrs []epAddr
}

// epAddr is one published endpoint address.
type epAddr struct {
	addr netip.Addr // unmapped
	host string     // lower-case hostname label
	// target is <host>.<svc>.<ns>.svc.<zone>, "" when too long to be a name.
	target string
}

// newService converts a Service and its slices; nil when its name cannot be
// served (too long for DNS, or empty).
func newService(st *model.ServiceState, zone string) *service {
	svc := st.Service
	if svc.Name == "" || svc.Namespace == "" {
		return nil
	}
	fqdn := strings.ToLower(svc.Name) + "." + strings.ToLower(svc.Namespace) + ".svc." + zone
	if len(fqdn) > maxName {
		return nil
	}
	s := &service{fqdn: fqdn}
	switch {
	case svc.Type == model.ServiceTypeExternalName:
		s.kind = kindExternalName
		s.external = externalTarget(svc.ExternalName)
		return s
	case svc.Headless && len(svc.ClusterIPs) == 0:
		s.kind = kindHeadless
	default:
		s.kind = kindClusterIP
		s.ips = make([]netip.Addr, 0, len(svc.ClusterIPs))
		for _, ip := range svc.ClusterIPs {
			if ip.IsValid() {
				s.ips = append(s.ips, ip.Unmap())
			}
		}
		s.ports = svc.Ports
	}
	all := publishesNotReady(svc)
	for _, sl := range st.Slices {
		if e, ok := newEpSlice(sl, fqdn, all); ok {
			s.slices = append(s.slices, e)
		}
	}
	return s
}

// publishesNotReady reports whether every endpoint of svc is published, ready or not.
func publishesNotReady(svc *model.Service) bool {
	return svc.PublishNotReadyAddresses || svc.Annotations[tolerateUnreadyAnnotation] == "true"
}

// newEpSlice keeps the published addresses of sl; ok is false when there are none.
func newEpSlice(sl *model.EndpointSlice, fqdn string, all bool) (e epSlice, ok bool) {
	n := 0
	for i := range sl.Endpoints {
		if ep := &sl.Endpoints[i]; ep.Ready || all {
			n += len(ep.Addresses)
		}
	}
	if n == 0 {
		return e, false
	}
	e.addrs = make([]epAddr, 0, n)
	for i := range sl.Endpoints {
		ep := &sl.Endpoints[i]
		if !ep.Ready && !all {
			continue
		}
		for _, a := range ep.Addresses {
			if a.IsValid() {
				e.addrs = append(e.addrs, newEpAddr(ep.Hostname, a, fqdn))
			}
		}
	}
	if len(e.addrs) == 0 {
		return e, false
	}
	e.ports = sl.Ports
	return e, true
}

// newEpAddr names one endpoint address of the Service fqdn. Its host is the
// spec's hostname of the endpoint: the hostname field when that is a DNS label,
// else the IP with "." (IPv4) or ":" (IPv6) replaced by "-", and a "0" appended
// when that ends in "-", as CoreDNS does.
// host and target share one allocation.
func newEpAddr(hostname string, a netip.Addr, fqdn string) epAddr {
	var buf [64]byte
	var host []byte
	if h := strings.ToLower(hostname); isLabel(h) {
		host = append(buf[:0], h...)
	} else {
		host = a.AppendTo(buf[:0])
		sep := byte(':')
		if bytes.IndexByte(host, '.') >= 0 {
			sep = '.'
		}
		for i, c := range host {
			if c == sep {
				host[i] = '-'
			}
		}
		// An IPv6 address ending in "::" would end the label in "-", which no
		// host name may; CoreDNS appends "0" (fd00:1:: -> fd00-1--0).
		if host[len(host)-1] == '-' {
			host = append(host, '0')
		}
	}
	var b strings.Builder
	b.Grow(len(host) + 1 + len(fqdn))
	b.Write(host)
	b.WriteByte('.')
	b.WriteString(fqdn)
	t := b.String()
	e := epAddr{addr: a.Unmap(), host: t[:len(host)], target: t}
	if len(t) > maxName {
		e.target = ""
	}
	return e
}

// isLabel reports whether s is 1 to 63 characters of [a-z0-9-].
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// externalTarget returns name fully qualified, or "" when it is not a domain name
// that fits in a record. A name that looks like an IPv4 address stays a name: the
// spec (2.5) makes it a CNAME target like any other.
func externalTarget(name string) string {
	n := dns.Fqdn(strings.TrimSpace(name))
	if n == "." || len(n) > maxName {
		return ""
	}
	if _, ok := dns.IsDomainName(n); !ok {
		return ""
	}
	return n
}

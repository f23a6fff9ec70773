package difftest

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// QueryTypes are asked for every name: the types the specification defines
// records of, CNAME, ANY, and SOA, NS and MX as other types.
var QueryTypes = []uint16{
	dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT, dns.TypeCNAME,
	dns.TypeANY, dns.TypeSOA, dns.TypeNS, dns.TypeMX,
}

// Names returns every name the differential test asks about, lower-case and
// fully qualified, in a fixed order without repeats: for each Service its name,
// its SRV names (named ports with the right and a wrong protocol, a port
// number, a bare protocol), the name of every endpoint (by hostname, else by
// CoreDNS's dashed address), an unknown endpoint; the reverse name of every
// ClusterIP, endpoint and Pod address and of unknown addresses; Pod names (an
// existing and an unknown Pod IP, IPv6, bad forms, unknown namespace); the zone's
// structure (apex, svc, pod, namespaces with and without Services, unknown
// namespaces, too many labels, wildcards, dns-version); partial reverse zones;
// names outside every zone; and the longest names.
func Names(f *Fixture) []string {
	z := f.Zone + "."
	var names []string
	add := func(n ...string) { names = append(names, n...) }
	var ips []string
	for _, s := range f.Services {
		base := s.Name + "." + s.Namespace + ".svc." + z
		add(base, "nosuch."+base, "_tcp."+base)
		for i, p := range s.Spec.Ports {
			proto := "_" + strings.ToLower(string(p.Protocol))
			if p.Name == "" {
				add("_"+strings.ToLower(string(p.Protocol))+"."+base, "_"+itoa(p.Port)+"."+proto+"."+base)
				continue
			}
			add("_" + p.Name + "." + proto + "." + base)
			if i == 0 {
				wrong := "_udp"
				if p.Protocol == corev1.ProtocolUDP {
					wrong = "_tcp"
				}
				add("_"+p.Name+"."+wrong+"."+base, "_"+itoa(p.Port)+"."+proto+"."+base, p.Name+"."+proto[1:]+"."+base)
			}
		}
		ips = append(ips, s.Spec.ClusterIPs...)
		for _, sl := range f.Slices {
			if sl.Namespace != s.Namespace || sl.Labels[discoveryv1.LabelServiceName] != s.Name {
				continue
			}
			for _, e := range sl.Endpoints {
				ips = append(ips, e.Addresses...)
				for _, a := range e.Addresses {
					host := dashed(a)
					if e.Hostname != nil {
						host = *e.Hostname
					}
					add(host+"."+base, "_http._tcp."+host+"."+base)
				}
			}
		}
	}
	for _, p := range f.Pods {
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
			add(dashed(ip.IP)+"."+p.Namespace+".pod."+z, dashed(ip.IP)+".delta.pod."+z, dashed(ip.IP)+".nosuchns.pod."+z)
		}
	}
	ips = append(ips, "10.96.0.1", "10.96.0.2", "10.96.10.99", "192.168.1.99", "127.0.0.1", "172.26.236.177",
		"fd00:96::1", "fd00:96::a:99", "fd00:192:168:1::99", "2001:db8::1")
	for _, ip := range ips {
		if r, err := dns.ReverseAddr(ip); err == nil {
			add(r)
		}
	}
	add(
		// Pod names: not an address, IPv4 with too few parts, out of range.
		"192-168-1-99.alpha.pod."+z, "1-2-3.alpha.pod."+z, "300-1-1-1.alpha.pod."+z, "x.alpha.pod."+z,
		"a.192-168-1-21.alpha.pod."+z, "10-96-10-1.alpha.pod."+z,
		// The zone's structure.
		z, "svc."+z, "pod."+z, "alpha.svc."+z, "beta.svc."+z, "gamma.svc."+z, "delta.svc."+z, "default.svc."+z,
		"nosuchns.svc."+z, "alpha.pod."+z, "delta.pod."+z, "nosuchns.pod."+z, "nosuch."+z, "web.nosuchns.svc."+z,
		"web.alpha.pod."+z, "web.alpha.nosuch."+z, "kubernetes.default.svc."+z, "a.b.c.web.alpha.svc."+z,
		"x.hl-0.hl.alpha.svc."+z, "ns.dns."+z, "dns."+z, "dns-version."+z, "x.dns-version."+z,
		// Wildcards (kube-dns once answered them; the specification has none).
		"*.alpha.svc."+z, "web.*.svc."+z, "*.*.svc."+z, "any.alpha.svc."+z, "*.hl.alpha.svc."+z, "_*._*.web.alpha.svc."+z,
		// Reverse zones, partial and malformed.
		"in-addr.arpa.", "10.in-addr.arpa.", "96.10.in-addr.arpa.", "10.96.10.in-addr.arpa.", "x.1.10.96.10.in-addr.arpa.",
		"300.10.96.10.in-addr.arpa.", "ip6.arpa.", "0.0.d.f.ip6.arpa.", "arpa.",
		// Outside every zone.
		".", "example.com.", "www.example.com.", "local.", "cluster.local.example.com.", "web.alpha.svc.cluster.other.",
		// The longest names: 63-character labels to near the 255-octet limit.
		f.Services[len(f.Services)-2].Name+"."+f.Services[len(f.Services)-2].Name+".beta.svc."+z,
		longName(z),
	)
	seen := map[string]bool{}
	out := names[:0]
	for _, n := range names {
		n = strings.ToLower(n)
		if _, ok := dns.IsDomainName(n); !ok || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return slices.Clip(out)
}

// longName is a name in zone of 250 or more octets (in wire form, at most 255).
func longName(zone string) string {
	l := strings.Repeat("a", 63)
	n := l + "." + l + "." + l + ".svc." + zone
	for len(n)+1 < 253 {
		n = "b" + n
	}
	return n
}

// dashed is an address with '.' and ':' replaced by '-', and a trailing '-'
// completed with '0' (CoreDNS's endpoint and Pod name form).
func dashed(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	s := strings.NewReplacer(".", "-", ":", "-").Replace(a.String())
	if strings.HasSuffix(s, "-") {
		s += "0"
	}
	return s
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// Generate returns every name of Names times every type of QueryTypes, each
// name in a random mix of upper and lower case (seeded: the same seed gives
// the same queries).
func Generate(f *Fixture, seed uint64) []Query {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []Query
	for _, n := range Names(f) {
		for _, t := range QueryTypes {
			out = append(out, Query{Name: randomCase(rng, n), Type: t})
		}
	}
	return out
}

func randomCase(rng *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' && rng.IntN(2) == 0 {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

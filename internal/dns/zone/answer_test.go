package zone

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// Negative answers' authority sections, at the fixture's revision 8 and TTL 5.
const (
	soaCluster   = "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 8 7200 1800 86400 5\n"
	soaIn4       = "in-addr.arpa. 5 IN SOA ns.dns.in-addr.arpa. hostmaster.in-addr.arpa. 8 7200 1800 86400 5\n"
	wantNXDomain = ";; NXDOMAIN\n;; AUTHORITY\n" + soaCluster
	wantNodata   = ";; NOERROR\n;; AUTHORITY\n" + soaCluster
)

// Reverse names of the fixture's IPv6 addresses.
const (
	ptrDual6 = "2.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.f.ip6.arpa."
	ptrEtcd6 = "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.8.6.1.0.2.9.1.0.0.0.d.f.ip6.arpa."
)

// answerCase is one question and the reply it must get, written as zone text: a
// first line ";; RCODE", then records of the answer section, then optionally
// ";; AUTHORITY" and ";; ADDITIONAL" each followed by that section's records.
// Sections compare as sets.
type answerCase struct {
	q    string // "NAME TYPE"
	want string
}

var answerCases = []answerCase{
	// Schema version (spec 2.2).
	{"dns-version.cluster.local. TXT", `;; NOERROR
dns-version.cluster.local. 28800 IN TXT "1.1.0"`},
	{"dns-version.cluster.local. A", wantNodata},
	{"x.dns-version.cluster.local. TXT", wantNXDomain},

	// The apex, the nameserver, and the structural names.
	{"cluster.local. SOA", ";; NOERROR\n" + soaCluster},
	{"cluster.local. NS", `;; NOERROR
cluster.local. 5 IN NS kube-dns.kube-system.svc.cluster.local.
;; ADDITIONAL
kube-dns.kube-system.svc.cluster.local. 5 IN A 10.96.0.10`},
	{"cluster.local. A", wantNodata},
	{"ns.dns.cluster.local. A", ";; NOERROR\nns.dns.cluster.local. 5 IN A 10.96.0.10"},
	{"ns.dns.cluster.local. AAAA", wantNodata},
	{"dns.cluster.local. A", wantNXDomain},
	{"svc.cluster.local. A", wantNodata},
	{"pod.cluster.local. A", wantNodata},
	{"default.svc.cluster.local. A", wantNodata},
	{"nosuchns.svc.cluster.local. A", wantNXDomain},
	{"foo.cluster.local. A", wantNXDomain},
	{"nosuch.default.svc.cluster.local. A", wantNXDomain},

	// ClusterIP Services (spec 2.3).
	{"web.default.svc.cluster.local. A", ";; NOERROR\nweb.default.svc.cluster.local. 5 IN A 10.96.0.20"},
	{"web.default.svc.cluster.local. AAAA", wantNodata},
	{"web.default.svc.cluster.local. TXT", wantNodata},
	{"web.default.svc.cluster.local. CNAME", wantNodata},
	{"web.default.svc.cluster.local. PTR", wantNodata},
	{"web.default.svc.cluster.local. MX", wantNodata},
	{"web.default.svc.cluster.local. ANY", wantNodata},
	{"_http._tcp.web.default.svc.cluster.local. SRV", `;; NOERROR
_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 100 80 web.default.svc.cluster.local.
;; ADDITIONAL
web.default.svc.cluster.local. 5 IN A 10.96.0.20`},
	{"_https._tcp.web.default.svc.cluster.local. SRV", `;; NOERROR
_https._tcp.web.default.svc.cluster.local. 5 IN SRV 0 100 443 web.default.svc.cluster.local.
;; ADDITIONAL
web.default.svc.cluster.local. 5 IN A 10.96.0.20`},
	{"_http._udp.web.default.svc.cluster.local. SRV", wantNXDomain},
	{"_nope._tcp.web.default.svc.cluster.local. SRV", wantNXDomain},
	{"_tcp.web.default.svc.cluster.local. SRV", wantNXDomain},
	// CoreDNS's grammar: underscores optional; an address question on a port name.
	{"http.tcp.web.default.svc.cluster.local. SRV", `;; NOERROR
http.tcp.web.default.svc.cluster.local. 5 IN SRV 0 100 80 web.default.svc.cluster.local.
;; ADDITIONAL
web.default.svc.cluster.local. 5 IN A 10.96.0.20`},
	{"_http._tcp.web.default.svc.cluster.local. A", ";; NOERROR\n_http._tcp.web.default.svc.cluster.local. 5 IN A 10.96.0.20"},
	{"_http._tcp.web.default.svc.cluster.local. TXT", wantNodata},
	// SRV at the Service's own name: every port, named or not, weight shared.
	{"web.default.svc.cluster.local. SRV", `;; NOERROR
web.default.svc.cluster.local. 5 IN SRV 0 50 80 web.default.svc.cluster.local.
web.default.svc.cluster.local. 5 IN SRV 0 50 443 web.default.svc.cluster.local.
;; ADDITIONAL
web.default.svc.cluster.local. 5 IN A 10.96.0.20`},
	{"plain.default.svc.cluster.local. SRV", `;; NOERROR
plain.default.svc.cluster.local. 5 IN SRV 0 100 8080 plain.default.svc.cluster.local.
;; ADDITIONAL
plain.default.svc.cluster.local. 5 IN A 10.96.0.21`},
	// Dual stack.
	{"dual.default.svc.cluster.local. A", ";; NOERROR\ndual.default.svc.cluster.local. 5 IN A 10.96.0.22"},
	{"dual.default.svc.cluster.local. AAAA", ";; NOERROR\ndual.default.svc.cluster.local. 5 IN AAAA fd00:96::22"},
	{"_dns._udp.dual.default.svc.cluster.local. SRV", `;; NOERROR
_dns._udp.dual.default.svc.cluster.local. 5 IN SRV 0 50 53 dual.default.svc.cluster.local.
;; ADDITIONAL
dual.default.svc.cluster.local. 5 IN A 10.96.0.22
dual.default.svc.cluster.local. 5 IN AAAA fd00:96::22`},
	{"dual.default.svc.cluster.local. SRV", `;; NOERROR
dual.default.svc.cluster.local. 5 IN SRV 0 25 53 dual.default.svc.cluster.local.
;; ADDITIONAL
dual.default.svc.cluster.local. 5 IN A 10.96.0.22
dual.default.svc.cluster.local. 5 IN AAAA fd00:96::22`},
	{"web6.v6only.svc.cluster.local. AAAA", ";; NOERROR\nweb6.v6only.svc.cluster.local. 5 IN AAAA fd00:96::30"},
	{"web6.v6only.svc.cluster.local. A", ";; NOERROR\n;; AUTHORITY\n" + soaCluster},
	// No ClusterIP allocated yet: the name exists, with no address.
	{"pending.default.svc.cluster.local. A", wantNodata},
	{"_http._tcp.pending.default.svc.cluster.local. SRV", wantNodata},
	// Endpoint names work under a ClusterIP Service too (CoreDNS).
	{"192-168-1-10.web.default.svc.cluster.local. A", ";; NOERROR\n192-168-1-10.web.default.svc.cluster.local. 5 IN A 192.168.1.10"},
	{"192-168-3-10.web.default.svc.cluster.local. A", wantNXDomain},

	// Headless Services (spec 2.4): three slices, an endpoint listed twice, IPv6.
	{"etcd.default.svc.cluster.local. A", `;; NOERROR
etcd.default.svc.cluster.local. 5 IN A 192.168.1.20
etcd.default.svc.cluster.local. 5 IN A 192.168.2.20
etcd.default.svc.cluster.local. 5 IN A 192.168.1.21`},
	{"etcd.default.svc.cluster.local. AAAA", ";; NOERROR\netcd.default.svc.cluster.local. 5 IN AAAA fd00:192:168:1::20"},
	{"_peer._tcp.etcd.default.svc.cluster.local. SRV", `;; NOERROR
_peer._tcp.etcd.default.svc.cluster.local. 5 IN SRV 0 20 2380 etcd-0.etcd.default.svc.cluster.local.
_peer._tcp.etcd.default.svc.cluster.local. 5 IN SRV 0 20 2380 etcd-1.etcd.default.svc.cluster.local.
_peer._tcp.etcd.default.svc.cluster.local. 5 IN SRV 0 20 2380 192-168-1-21.etcd.default.svc.cluster.local.
;; ADDITIONAL
etcd-0.etcd.default.svc.cluster.local. 5 IN A 192.168.1.20
etcd-0.etcd.default.svc.cluster.local. 5 IN AAAA fd00:192:168:1::20
etcd-1.etcd.default.svc.cluster.local. 5 IN A 192.168.2.20
192-168-1-21.etcd.default.svc.cluster.local. 5 IN A 192.168.1.21`},
	{"etcd.default.svc.cluster.local. SRV", `;; NOERROR
etcd.default.svc.cluster.local. 5 IN SRV 0 10 2380 etcd-0.etcd.default.svc.cluster.local.
etcd.default.svc.cluster.local. 5 IN SRV 0 10 2379 etcd-0.etcd.default.svc.cluster.local.
etcd.default.svc.cluster.local. 5 IN SRV 0 10 2380 etcd-1.etcd.default.svc.cluster.local.
etcd.default.svc.cluster.local. 5 IN SRV 0 10 2379 etcd-1.etcd.default.svc.cluster.local.
etcd.default.svc.cluster.local. 5 IN SRV 0 10 2380 192-168-1-21.etcd.default.svc.cluster.local.
etcd.default.svc.cluster.local. 5 IN SRV 0 10 2379 192-168-1-21.etcd.default.svc.cluster.local.
;; ADDITIONAL
etcd-0.etcd.default.svc.cluster.local. 5 IN A 192.168.1.20
etcd-0.etcd.default.svc.cluster.local. 5 IN AAAA fd00:192:168:1::20
etcd-1.etcd.default.svc.cluster.local. 5 IN A 192.168.2.20
192-168-1-21.etcd.default.svc.cluster.local. 5 IN A 192.168.1.21`},
	{"_peer._udp.etcd.default.svc.cluster.local. SRV", wantNXDomain},
	{"etcd-0.etcd.default.svc.cluster.local. A", ";; NOERROR\netcd-0.etcd.default.svc.cluster.local. 5 IN A 192.168.1.20"},
	{"etcd-0.etcd.default.svc.cluster.local. AAAA", ";; NOERROR\netcd-0.etcd.default.svc.cluster.local. 5 IN AAAA fd00:192:168:1::20"},
	{"etcd-0.etcd.default.svc.cluster.local. TXT", wantNodata},
	{"etcd-0.etcd.default.svc.cluster.local. SRV", `;; NOERROR
etcd-0.etcd.default.svc.cluster.local. 5 IN SRV 0 25 2380 etcd-0.etcd.default.svc.cluster.local.
etcd-0.etcd.default.svc.cluster.local. 5 IN SRV 0 25 2379 etcd-0.etcd.default.svc.cluster.local.
;; ADDITIONAL
etcd-0.etcd.default.svc.cluster.local. 5 IN A 192.168.1.20
etcd-0.etcd.default.svc.cluster.local. 5 IN AAAA fd00:192:168:1::20`},
	{"192-168-1-21.etcd.default.svc.cluster.local. A", ";; NOERROR\n192-168-1-21.etcd.default.svc.cluster.local. 5 IN A 192.168.1.21"},
	{"etcd-2.etcd.default.svc.cluster.local. A", wantNXDomain}, // not ready
	// No endpoints, none ready: NXDOMAIN (spec 2.4.1); published anyway.
	{"empty.default.svc.cluster.local. A", wantNXDomain},
	{"empty.default.svc.cluster.local. SRV", wantNXDomain},
	{"unready.default.svc.cluster.local. A", wantNXDomain},
	{"pnra.default.svc.cluster.local. A", ";; NOERROR\npnra.default.svc.cluster.local. 5 IN A 192.168.1.31"},
	{"tolerate.default.svc.cluster.local. A", ";; NOERROR\ntolerate.default.svc.cluster.local. 5 IN A 192.168.1.32"},
	// A slice without ports: addresses, but no SRV.
	{"noports.default.svc.cluster.local. A", ";; NOERROR\nnoports.default.svc.cluster.local. 5 IN A 192.168.1.40"},
	{"noports.default.svc.cluster.local. SRV", wantNodata},
	// A slice whose Service does not exist.
	{"orphan.default.svc.cluster.local. A", wantNXDomain},

	// ExternalName (spec 2.5): the CNAME whatever the type, followed inside the zone.
	{"ext.default.svc.cluster.local. A", ";; NOERROR\next.default.svc.cluster.local. 5 IN CNAME www.example.com."},
	{"ext.default.svc.cluster.local. AAAA", ";; NOERROR\next.default.svc.cluster.local. 5 IN CNAME www.example.com."},
	{"ext.default.svc.cluster.local. CNAME", ";; NOERROR\next.default.svc.cluster.local. 5 IN CNAME www.example.com."},
	{"ext.default.svc.cluster.local. SRV", ";; NOERROR\next.default.svc.cluster.local. 5 IN CNAME www.example.com."},
	{"ext.default.svc.cluster.local. TXT", ";; NOERROR\next.default.svc.cluster.local. 5 IN CNAME www.example.com."},
	{"ext-in.default.svc.cluster.local. A", `;; NOERROR
ext-in.default.svc.cluster.local. 5 IN CNAME web.default.svc.cluster.local.
web.default.svc.cluster.local. 5 IN A 10.96.0.20`},
	{"ext-in.default.svc.cluster.local. AAAA", `;; NOERROR
ext-in.default.svc.cluster.local. 5 IN CNAME web.default.svc.cluster.local.
;; AUTHORITY
` + soaCluster},
	{"ext-gone.default.svc.cluster.local. A", `;; NXDOMAIN
ext-gone.default.svc.cluster.local. 5 IN CNAME gone.default.svc.cluster.local.
;; AUTHORITY
` + soaCluster},
	{"ext-ip.default.svc.cluster.local. A", ";; NOERROR\next-ip.default.svc.cluster.local. 5 IN CNAME 1.2.3.4."},
	{"ext-loop.default.svc.cluster.local. A", ";; NOERROR\next-loop.default.svc.cluster.local. 5 IN CNAME ext-loop.default.svc.cluster.local."},
	{"x.ext.default.svc.cluster.local. A", wantNXDomain},
	{"_http._tcp.ext.default.svc.cluster.local. SRV", wantNXDomain},

	// Pods, insecure (spec 2.6).
	{"192-168-1-5.default.pod.cluster.local. A", ";; NOERROR\n192-168-1-5.default.pod.cluster.local. 5 IN A 192.168.1.5"},
	{"192-168-1-5.default.pod.cluster.local. AAAA", wantNodata},
	{"192-168-1-5.nosuchns.pod.cluster.local. A", ";; NOERROR\n192-168-1-5.nosuchns.pod.cluster.local. 5 IN A 192.168.1.5"},
	{"fd00-192-168-1--5.default.pod.cluster.local. AAAA", ";; NOERROR\nfd00-192-168-1--5.default.pod.cluster.local. 5 IN AAAA fd00:192:168:1::5"},
	{"fd00-192-168-1--5.default.pod.cluster.local. A", wantNodata},
	{"not-an-ip.default.pod.cluster.local. A", wantNXDomain},
	{"300-1-1-1.default.pod.cluster.local. A", wantNXDomain},
	{"default.pod.cluster.local. A", wantNodata},
	{"x.192-168-1-5.default.pod.cluster.local. A", wantNXDomain},

	// Case: matched without it, echoed in owners; targets and the SOA canonical.
	{"WeB.DeFault.SVC.Cluster.LOCAL. A", ";; NOERROR\nWeB.DeFault.SVC.Cluster.LOCAL. 5 IN A 10.96.0.20"},
	{"_HTTP._Tcp.Web.default.svc.cluster.local. SRV", `;; NOERROR
_HTTP._Tcp.Web.default.svc.cluster.local. 5 IN SRV 0 100 80 web.default.svc.cluster.local.
;; ADDITIONAL
web.default.svc.cluster.local. 5 IN A 10.96.0.20`},
	{"ETCD-0.Etcd.default.svc.cluster.local. A", ";; NOERROR\nETCD-0.Etcd.default.svc.cluster.local. 5 IN A 192.168.1.20"},
	{"NoSuch.default.svc.cluster.local. A", wantNXDomain},
	{"DNS-Version.Cluster.Local. TXT", ";; NOERROR\nDNS-Version.Cluster.Local. 28800 IN TXT \"1.1.0\""},
	// Trailing dot: a question without one is answered fully qualified.
	{"web.default.svc.cluster.local A", ";; NOERROR\nweb.default.svc.cluster.local. 5 IN A 10.96.0.20"},

	// Wildcards are ordinary labels (schema 1.1.0 has none).
	{"*.default.svc.cluster.local. A", wantNXDomain},
	{"any.default.svc.cluster.local. A", wantNXDomain},
	{"web.*.svc.cluster.local. A", wantNXDomain},
	{"_http._tcp.*.default.svc.cluster.local. SRV", wantNXDomain},
	{"*.etcd.default.svc.cluster.local. A", wantNXDomain},

	// Long names: 63-character namespace, Service and hostname labels.
	{longSvc + "." + longNS + ".svc.cluster.local. A", ";; NOERROR\n" + longSvc + "." + longNS + ".svc.cluster.local. 5 IN A 192.168.1.50"},
	{longHost + "." + longSvc + "." + longNS + ".svc.cluster.local. A",
		";; NOERROR\n" + longHost + "." + longSvc + "." + longNS + ".svc.cluster.local. 5 IN A 192.168.1.50"},
	{"_http._tcp." + longSvc + "." + longNS + ".svc.cluster.local. SRV", ";; NOERROR\n" +
		"_http._tcp." + longSvc + "." + longNS + ".svc.cluster.local. 5 IN SRV 0 100 80 " + longHost + "." + longSvc + "." + longNS + ".svc.cluster.local.\n" +
		";; ADDITIONAL\n" + longHost + "." + longSvc + "." + longNS + ".svc.cluster.local. 5 IN A 192.168.1.50"},
	{"a.b.c.d.web.default.svc.cluster.local. A", wantNXDomain},
	{"x._http._tcp.web.default.svc.cluster.local. A", wantNXDomain},

	// PTR (spec 2.3.3, 2.4.3): ClusterIPs, then endpoints of any Service.
	{"20.0.96.10.in-addr.arpa. PTR", ";; NOERROR\n20.0.96.10.in-addr.arpa. 5 IN PTR web.default.svc.cluster.local."},
	{"20.1.168.192.in-addr.arpa. PTR", ";; NOERROR\n20.1.168.192.in-addr.arpa. 5 IN PTR etcd-0.etcd.default.svc.cluster.local."},
	{"20.2.168.192.in-addr.arpa. PTR", ";; NOERROR\n20.2.168.192.in-addr.arpa. 5 IN PTR etcd-1.etcd.default.svc.cluster.local."},
	{"21.1.168.192.in-addr.arpa. PTR", ";; NOERROR\n21.1.168.192.in-addr.arpa. 5 IN PTR 192-168-1-21.etcd.default.svc.cluster.local."},
	{"10.1.168.192.in-addr.arpa. PTR", ";; NOERROR\n10.1.168.192.in-addr.arpa. 5 IN PTR 192-168-1-10.web.default.svc.cluster.local."},
	{ptrDual6 + " PTR", ";; NOERROR\n" + ptrDual6 + " 5 IN PTR dual.default.svc.cluster.local."},
	{ptrEtcd6 + " PTR", ";; NOERROR\n" + ptrEtcd6 + " 5 IN PTR etcd-0.etcd.default.svc.cluster.local."},
	{"20.0.96.10.IN-ADDR.ARPA. PTR", ";; NOERROR\n20.0.96.10.IN-ADDR.ARPA. 5 IN PTR web.default.svc.cluster.local."},
	{"20.0.96.10.in-addr.arpa. A", ";; NOERROR\n;; AUTHORITY\n" + soaIn4},
	{"40.1.168.192.in-addr.arpa. PTR", ";; NOERROR\n40.1.168.192.in-addr.arpa. 5 IN PTR 192-168-1-40.noports.default.svc.cluster.local."},
}

func TestAnswer(t *testing.T) {
	v := Build(Config{Zone: "cluster.local", TTL: 5}, fixture(t))
	for _, c := range answerCases {
		t.Run(c.q, func(t *testing.T) {
			req := question(t, c.q)
			resp, ours := v.Answer(req)
			if !ours {
				t.Fatalf("ours = false, want an answer")
			}
			checkReply(t, req, resp)
			want := parseReply(t, c.want)
			if diff := cmp.Diff(want, replyOf(resp)); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}

// reply is a DNS reply as comparable text: the rcode and each section's records
// in presentation form, sorted.
type reply struct {
	Rcode                    string
	Answer, Authority, Extra []string
}

func replyOf(m *dns.Msg) reply {
	return reply{
		Rcode:     dns.RcodeToString[m.Rcode],
		Answer:    rrStrings(m.Answer),
		Authority: rrStrings(m.Ns),
		Extra:     rrStrings(m.Extra),
	}
}

func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	sort.Strings(out)
	return out
}

// parseReply reads the zone-text form of answerCase.want.
func parseReply(t *testing.T, text string) reply {
	t.Helper()
	var r reply
	var rrs [3][]dns.RR
	section := -1
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case section < 0:
			rcode, ok := strings.CutPrefix(line, ";; ")
			if _, known := dns.StringToRcode[rcode]; !ok || !known {
				t.Fatalf("want %q: first line must be \";; RCODE\"", text)
			}
			r.Rcode, section = rcode, 0
		case line == ";; AUTHORITY":
			section = 1
		case line == ";; ADDITIONAL":
			section = 2
		default:
			rr, err := dns.NewRR(line)
			if err != nil || rr == nil {
				t.Fatalf("want: record %q: %v", line, err)
			}
			rrs[section] = append(rrs[section], rr)
		}
	}
	r.Answer, r.Authority, r.Extra = rrStrings(rrs[0]), rrStrings(rrs[1]), rrStrings(rrs[2])
	return r
}

// checkReply checks what every reply of the View must be: a response to req with
// its ID, opcode, RD bit and question (fully qualified), authoritative, without
// truncation or OPT, and packable.
func checkReply(t *testing.T, req, resp *dns.Msg) {
	t.Helper()
	if !resp.Response || resp.Id != req.Id || resp.Opcode != req.Opcode || resp.RecursionDesired != req.RecursionDesired {
		t.Errorf("header: response=%v id=%d opcode=%d rd=%v, want a response to id %d opcode %d rd %v",
			resp.Response, resp.Id, resp.Opcode, resp.RecursionDesired, req.Id, req.Opcode, req.RecursionDesired)
	}
	if !resp.Authoritative || resp.Truncated {
		t.Errorf("header: aa=%v tc=%v, want aa and no tc", resp.Authoritative, resp.Truncated)
	}
	if len(resp.Question) != 1 || resp.Question[0].Name != dns.Fqdn(req.Question[0].Name) ||
		resp.Question[0].Qtype != req.Question[0].Qtype {
		t.Errorf("question = %v, want %v", resp.Question, req.Question)
	}
	if resp.IsEdns0() != nil {
		t.Errorf("reply carries an OPT record")
	}
	if _, err := resp.Pack(); err != nil {
		t.Errorf("reply does not pack: %v", err)
	}
}

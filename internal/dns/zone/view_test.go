package zone

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/source/file"
)

func TestAnswerLeavesOtherNames(t *testing.T) {
	v := Build(Config{Zone: "cluster.local", TTL: 5}, fixture(t))
	for _, q := range []string{
		"example.com. A",
		"cluster.local.example.com. A",
		"xcluster.local. A",
		"local. SOA",
		". NS",
		`web\.default.svc.cluster.local.example. A`,
		// Reverse names of addresses the View does not hold, or not of one address.
		"99.99.99.10.in-addr.arpa. PTR",
		"96.10.in-addr.arpa. PTR",
		"in-addr.arpa. SOA",
		"ip6.arpa. NS",
		"60.1.168.192.in-addr.arpa. PTR", // an endpoint of a Service that does not exist
		"30.1.168.192.in-addr.arpa. PTR", // an endpoint that is not ready
		"020.0.96.10.in-addr.arpa. PTR",  // leading zero
		"x.20.0.96.10.in-addr.arpa. PTR",
		"2.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.ip6.arpa. PTR", // 31 nibbles
	} {
		if resp, ours := v.Answer(question(t, q)); ours || resp != nil {
			t.Errorf("%s: ours=%v resp=%v, want not ours and no reply", q, ours, resp)
		}
	}
	if resp, ours := v.Answer(nil); ours || resp != nil {
		t.Errorf("nil request: ours=%v resp=%v, want not ours", ours, resp)
	}
}

func TestAnswerRefusesAndRejects(t *testing.T) {
	v := Build(Config{}, fixture(t))
	chaos := question(t, "web.default.svc.cluster.local. A")
	chaos.Question[0].Qclass = dns.ClassCHAOS
	axfr := question(t, "cluster.local. AXFR")
	ixfr := question(t, "cluster.local. IXFR")
	ptrChaos := question(t, "20.0.96.10.in-addr.arpa. PTR")
	ptrChaos.Question[0].Qclass = dns.ClassCHAOS
	notify := question(t, "cluster.local. SOA")
	notify.Opcode = dns.OpcodeNotify
	none := question(t, "cluster.local. SOA")
	none.Question = nil
	two := question(t, "cluster.local. SOA")
	two.Question = append(two.Question, two.Question[0])
	for _, c := range []struct {
		name  string
		req   *dns.Msg
		rcode int
	}{
		{"class CH", chaos, dns.RcodeRefused},
		{"AXFR", axfr, dns.RcodeRefused},
		{"IXFR", ixfr, dns.RcodeRefused},
		{"PTR class CH", ptrChaos, dns.RcodeRefused},
		{"NOTIFY", notify, dns.RcodeNotImplemented},
		{"no question", none, dns.RcodeFormatError},
		{"two questions", two, dns.RcodeFormatError},
	} {
		resp, ours := v.Answer(c.req)
		if !ours || resp == nil {
			t.Errorf("%s: ours=%v, want a reply", c.name, ours)
			continue
		}
		if resp.Rcode != c.rcode || len(resp.Answer) != 0 || resp.Id != c.req.Id || !resp.Response {
			t.Errorf("%s: rcode %s with %d answers, id %d, want %s, none, id %d",
				c.name, dns.RcodeToString[resp.Rcode], len(resp.Answer), resp.Id, dns.RcodeToString[c.rcode], c.req.Id)
		}
		if _, err := resp.Pack(); err != nil {
			t.Errorf("%s: reply does not pack: %v", c.name, err)
		}
	}
	// Class ANY is answered as IN.
	anyClass := question(t, "web.default.svc.cluster.local. A")
	anyClass.Question[0].Qclass = dns.ClassANY
	if resp, _ := v.Answer(anyClass); resp == nil || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Errorf("class ANY: %v, want the A record", resp)
	}
}

func TestConfig(t *testing.T) {
	snap := fixture(t)
	for _, c := range []struct {
		cfg       Config
		q         string
		wantOwner string
		wantSOA   string
	}{
		{Config{}, "nosuch.cluster.local. A", "", "cluster.local.\t0\tIN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local. 8 7200 1800 86400 0"},
		{Config{Zone: "Example.ORG.", TTL: 30}, "nosuch.example.org. A", "", "example.org.\t30\tIN\tSOA\tns.dns.example.org. hostmaster.example.org. 8 7200 1800 86400 30"},
		{Config{Zone: " example.org ", TTL: 600}, "example.org. SOA", "example.org.", "example.org.\t300\tIN\tSOA\tns.dns.example.org. hostmaster.example.org. 8 7200 1800 86400 600"},
		{Config{Zone: "example.org", TTL: 30}, "web.default.svc.example.org. A", "web.default.svc.example.org.\t30\tIN\tA\t10.96.0.20", ""},
	} {
		v := Build(c.cfg, snap)
		resp, ours := v.Answer(question(t, c.q))
		if !ours {
			t.Errorf("%+v %s: not ours", c.cfg, c.q)
			continue
		}
		var got string
		if len(resp.Answer) > 0 {
			got = resp.Answer[0].String()
		}
		if c.wantSOA != "" && strings.HasSuffix(c.q, " SOA") {
			if got != c.wantSOA {
				t.Errorf("%+v %s: answer %q, want %q", c.cfg, c.q, got, c.wantSOA)
			}
			continue
		}
		if got != c.wantOwner {
			t.Errorf("%+v %s: answer %q, want %q", c.cfg, c.q, got, c.wantOwner)
		}
		if c.wantSOA != "" && (len(resp.Ns) != 1 || resp.Ns[0].String() != c.wantSOA) {
			t.Errorf("%+v %s: authority %v, want %q", c.cfg, c.q, resp.Ns, c.wantSOA)
		}
	}
	if got := Build(Config{Zone: "Cluster.Local"}, nil).Zone(); got != "cluster.local." {
		t.Errorf("Zone() = %q, want cluster.local.", got)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, z := range []string{"", "cluster.local", "cluster.local.", "Example.Org", "a"} {
		if err := (Config{Zone: z}).Validate(); err != nil {
			t.Errorf("zone %q: %v, want valid", z, err)
		}
	}
	for _, z := range []string{".", "a..b", "arpa", "in-addr.arpa", "10.in-addr.arpa", "ip6.arpa.", strings.Repeat("a.", 101)} {
		if err := (Config{Zone: z}).Validate(); err == nil {
			t.Errorf("zone %q: valid, want an error", z)
		}
	}
}

// A zone so long that endpoint names no longer fit in 255 octets: those names
// and their SRV targets and PTRs are left out, and the rest is served.
func TestLongZoneDropsNamesThatDoNotFit(t *testing.T) {
	zone := strings.Repeat("z", 60) + ".example"
	v := Build(Config{Zone: zone, TTL: 5}, fixture(t))
	base := longSvc + "." + longNS + ".svc." + zone + "."
	resp, _ := v.Answer(question(t, base+" A"))
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Errorf("%s A: %v, want the endpoint's address", base, resp)
	}
	resp, _ = v.Answer(question(t, "_http._tcp."+base+" SRV"))
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 0 || len(resp.Ns) != 1 {
		t.Errorf("_http._tcp.%s SRV: %v, want NODATA (the target does not fit)", base, resp)
	}
	if resp, ours := v.Answer(question(t, "50.1.168.192.in-addr.arpa. PTR")); ours {
		t.Errorf("PTR of the long endpoint: %v, want not ours", resp)
	}
	if resp, _ := v.Answer(question(t, "web.default.svc."+zone+". A")); len(resp.Answer) != 1 {
		t.Errorf("web: %v, want its A record", resp)
	}
}

// Build of no snapshot (or an empty one) is an empty cluster: what the server
// asks before the source has synced.
func TestBuildEmpty(t *testing.T) {
	for _, snap := range []*model.Snapshot{nil, model.NewStore().Snapshot()} {
		v := Build(Config{TTL: 5}, snap)
		for q, rcode := range map[string]int{
			"dns-version.cluster.local. TXT":       dns.RcodeSuccess,
			"web.default.svc.cluster.local. A":     dns.RcodeNameError,
			"default.svc.cluster.local. A":         dns.RcodeNameError,
			"1-2-3-4.default.pod.cluster.local. A": dns.RcodeSuccess,
		} {
			resp, ours := v.Answer(question(t, q))
			if !ours || resp.Rcode != rcode {
				t.Errorf("%s: ours=%v %v, want rcode %s", q, ours, resp, dns.RcodeToString[rcode])
			}
		}
		resp, _ := v.Answer(question(t, "cluster.local. NS"))
		want := "cluster.local.\t5\tIN\tNS\tns.dns.cluster.local."
		if len(resp.Answer) != 1 || resp.Answer[0].String() != want || len(resp.Extra) != 0 {
			t.Errorf("NS without kube-dns: %v, want %q without glue", resp, want)
		}
	}
}

// A View is of its snapshot: later changes to the store do not reach it.
func TestViewIsImmutable(t *testing.T) {
	store := model.NewStore()
	store.Update(func(tx *model.Txn) {
		tx.SetService(clusterIP("default", "web", []string{"10.96.0.20"}, sp("http", model.ProtocolTCP, 80)))
	})
	old := Build(Config{TTL: 5}, store.Snapshot())
	store.Update(func(tx *model.Txn) {
		tx.SetService(clusterIP("default", "web", []string{"10.96.0.99"}, sp("http", model.ProtocolTCP, 80)))
	})
	cur := Build(Config{TTL: 5}, store.Snapshot())
	for v, want := range map[*View]string{old: "10.96.0.20", cur: "10.96.0.99"} {
		resp, _ := v.Answer(question(t, "web.default.svc.cluster.local. A"))
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != want {
			t.Errorf("answer %v, want %s", resp.Answer, want)
		}
	}
}

// Answer is safe for concurrent use (run with -race).
func TestAnswerConcurrent(t *testing.T) {
	v := Build(Config{TTL: 5}, fixture(t))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				c := answerCases[(g*200+i)%len(answerCases)]
				if resp, ours := v.Answer(question(t, c.q)); !ours || resp == nil {
					t.Errorf("%s: no answer", c.q)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSRVWeight(t *testing.T) {
	for n, want := range map[int]uint16{1: 100, 2: 50, 3: 33, 4: 25, 5: 20, 6: 16, 7: 14, 10: 10, 99: 1, 100: 1, 101: 1, 1000: 1} {
		if got := srvWeight(n); got != want {
			t.Errorf("srvWeight(%d) = %d, want %d", n, got, want)
		}
	}
}

// The same answers from manifests through the file source and its control plane:
// Pod readiness, hostname and subdomain become endpoint conditions and hostnames.
func TestAnswerFromManifests(t *testing.T) {
	l, err := file.Load(file.Options{
		Path:      filepath.Join("testdata", "shop.yaml"),
		StatePath: filepath.Join(t.TempDir(), "state.json"),
		ReadOnly:  true,
		Now:       func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Errors) != 0 {
		t.Fatalf("manifest errors: %v", l.Errors)
	}
	snap := l.Snapshot()
	soa := "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5\n"
	v := Build(Config{TTL: 5}, snap)
	for _, c := range []answerCase{
		{"db.shop.svc.cluster.local. A", ";; NOERROR\ndb.shop.svc.cluster.local. 5 IN A 192.168.1.7"},
		{"db-0.db.shop.svc.cluster.local. A", ";; NOERROR\ndb-0.db.shop.svc.cluster.local. 5 IN A 192.168.1.7"},
		{"db-1.db.shop.svc.cluster.local. A", ";; NXDOMAIN\n;; AUTHORITY\n" + soa},
		{"_pg._tcp.db.shop.svc.cluster.local. SRV", `;; NOERROR
_pg._tcp.db.shop.svc.cluster.local. 5 IN SRV 0 100 5432 db-0.db.shop.svc.cluster.local.
;; ADDITIONAL
db-0.db.shop.svc.cluster.local. 5 IN A 192.168.1.7`},
		{"7.1.168.192.in-addr.arpa. PTR", ";; NOERROR\n7.1.168.192.in-addr.arpa. 5 IN PTR db-0.db.shop.svc.cluster.local."},
		{"web.shop.svc.cluster.local. A", ";; NOERROR\nweb.shop.svc.cluster.local. 5 IN A 10.96.0.50"},
		{"_http._tcp.web.shop.svc.cluster.local. SRV", `;; NOERROR
_http._tcp.web.shop.svc.cluster.local. 5 IN SRV 0 100 80 web.shop.svc.cluster.local.
;; ADDITIONAL
web.shop.svc.cluster.local. 5 IN A 10.96.0.50`},
		{"192-168-1-8.web.shop.svc.cluster.local. A", ";; NOERROR\n192-168-1-8.web.shop.svc.cluster.local. 5 IN A 192.168.1.8"},
		{"50.0.96.10.in-addr.arpa. PTR", ";; NOERROR\n50.0.96.10.in-addr.arpa. 5 IN PTR web.shop.svc.cluster.local."},
		{"alias.shop.svc.cluster.local. A", `;; NOERROR
alias.shop.svc.cluster.local. 5 IN CNAME db.shop.svc.cluster.local.
db.shop.svc.cluster.local. 5 IN A 192.168.1.7`},
		{"shop.svc.cluster.local. A", ";; NOERROR\n;; AUTHORITY\n" + soa},
	} {
		req := question(t, c.q)
		resp, ours := v.Answer(req)
		if !ours {
			t.Errorf("%s: not ours", c.q)
			continue
		}
		checkReply(t, req, resp)
		if diff := cmp.Diff(parseReply(t, c.want), replyOf(resp)); diff != "" {
			t.Errorf("%s: reply (-want +got):\n%s", c.q, diff)
		}
	}
}

// A headless Service with many endpoints, each listed in two slices: one record
// per address, and one SRV per hostname.
func TestManyEndpoints(t *testing.T) {
	tcp := model.ProtocolTCP
	var eps []model.Endpoint
	for i := range 40 {
		eps = append(eps, ep(fmt.Sprintf("192.168.1.%d", 100+i), fmt.Sprintf("w-%d", i), true))
	}
	ports := []model.EndpointPort{epp("http", tcp, 80)}
	store := model.NewStore()
	store.Update(func(tx *model.Txn) {
		tx.SetService(headless("default", "many", sp("http", tcp, 80)))
		tx.SetEndpointSlice(slice("default", "many-a", "many", ipfamily.IPv4, ports, eps...))
		tx.SetEndpointSlice(slice("default", "many-b", "many", ipfamily.IPv4, ports, eps...))
	})
	v := Build(Config{TTL: 5}, store.Snapshot())
	resp, _ := v.Answer(question(t, "many.default.svc.cluster.local. A"))
	if got := len(resp.Answer); got != 40 {
		t.Errorf("A: %d records, want 40", got)
	}
	resp, _ = v.Answer(question(t, "_http._tcp.many.default.svc.cluster.local. SRV"))
	if len(resp.Answer) != 40 || len(resp.Extra) != 40 {
		t.Fatalf("SRV: %d records, %d additional, want 40 and 40", len(resp.Answer), len(resp.Extra))
	}
	if w := resp.Answer[0].(*dns.SRV).Weight; w != 1 {
		t.Errorf("SRV weight %d, want 1 (100 shared among 80 targets)", w)
	}
}

// An endpoint without a hostname is named by its dashed IP; an IPv6 address
// ending in "::" gets a "0" so the label does not end in "-" (as CoreDNS).
func TestEndpointNameFromIP(t *testing.T) {
	for _, c := range []struct{ ip, host string }{
		{"192.168.1.7", "192-168-1-7"},
		{"fd00:192:168:1::7", "fd00-192-168-1--7"},
		{"fd00:192:168:1::", "fd00-192-168-1--0"},
	} {
		e := newEpAddr("", netip.MustParseAddr(c.ip), "hl.default.svc.cluster.local.")
		if e.host != c.host || e.target != c.host+".hl.default.svc.cluster.local." {
			t.Errorf("%s: host %q target %q, want %q", c.ip, e.host, e.target, c.host)
		}
	}
}

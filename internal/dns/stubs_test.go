package dns

import (
	"github.com/svcnet/svcnet/internal/model"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestParseKubeDNSConfigMap(t *testing.T) {
	base := Forwarding{Upstreams: []string{"192.0.2.53:53"}}
	f, err := ParseKubeDNSConfigMap("kube-system/kube-dns", map[string]string{
		"stubDomains":         `{"acme.local": ["10.0.0.5", "10.0.0.6:5353"], "Corp.Example": ["[fd00::1]:53"]}`,
		"upstreamNameservers": `["8.8.8.8", "8.8.4.4:53"]`,
	}, base)
	if err != nil {
		t.Fatal(err)
	}
	if want := "upstreams [8.8.8.8:53 8.8.4.4:53], acme.local. → [10.0.0.5:53 10.0.0.6:5353], corp.example. → [[fd00::1]:53]"; f.String() != want {
		t.Errorf("got %s\nwant %s", f, want)
	}
	for name, want := range map[string][]string{
		"abc.acme.local.":      {"10.0.0.5:53", "10.0.0.6:5353"},
		"acme.local.":          {"10.0.0.5:53", "10.0.0.6:5353"},
		"x.y.corp.example.":    {"[fd00::1]:53"},
		"notacme.local.":       {"8.8.8.8:53", "8.8.4.4:53"},
		"8.8.8.8.in-addr.arpa": {"8.8.8.8:53", "8.8.4.4:53"},
	} {
		if got := f.route(dns.CanonicalName(name)); !slices.Equal(got, want) {
			t.Errorf("route(%s) = %v, want %v", name, got, want)
		}
	}
	// Keys absent or empty: the base's upstreams, no stubs.
	if f, err := ParseKubeDNSConfigMap("kube-system/kube-dns", map[string]string{"stubDomains": " "}, base); err != nil || !slices.Equal(f.Upstreams, base.Upstreams) || len(f.Stubs) != 0 {
		t.Errorf("empty ConfigMap: %v, %v", f, err)
	}
	for _, bad := range []struct {
		data map[string]string
		want string
	}{
		{map[string]string{"upstreamNameservers": `8.8.8.8`}, "upstreamNameservers: want a JSON list"},
		{map[string]string{"upstreamNameservers": `["1.1.1.1","1.0.0.1","8.8.8.8","8.8.4.4"]`}, "4 servers, at most 3"},
		{map[string]string{"upstreamNameservers": `["dns.example"]`}, `"dns.example"`},
		{map[string]string{"stubDomains": `["acme.local"]`}, "stubDomains: want a JSON object"},
		{map[string]string{"stubDomains": `{"acme.local": []}`}, `domain "acme.local" has no servers`},
		{map[string]string{"stubDomains": `{"bad..name": ["10.0.0.1"]}`}, `"bad..name" is not a domain name`},
		{map[string]string{"stubDomains": `{"acme.local": ["10.0.0.1:0"]}`}, `bad port`},
	} {
		_, err := ParseKubeDNSConfigMap("kube-system/kube-dns", bad.data, base)
		if err == nil || !strings.Contains(err.Error(), "ConfigMap kube-system/kube-dns") || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: error %v, want one naming the ConfigMap and %q", bad.data, err, bad.want)
		}
	}
}

// TestSetForwarding: a stub domain goes to its server, other names to the
// upstreams in force, and nil brings back the configuration's.
func TestSetForwarding(t *testing.T) {
	stub, other := startUpstream(t), startUpstream(t)
	s, addr := start(t, ServerConfig{}, syncedStore())
	if r := ask(t, "udp", addr, question("example.com.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Fatalf("without upstreams: rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	f, err := ParseKubeDNSConfigMap("kube-system/kube-dns", map[string]string{
		"stubDomains":         `{"example.com": ["` + stub.addr + `"]}`,
		"upstreamNameservers": `["` + other.addr + `"]`,
	}, s.Base())
	if err != nil {
		t.Fatal(err)
	}
	s.SetForwarding(&f)
	if r := ask(t, "udp", addr, question("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || stub.queries.Load() != 1 || other.queries.Load() != 0 {
		t.Errorf("example.com: rcode %s, stub asked %d, upstream %d; want the stub once", dns.RcodeToString[r.Rcode], stub.queries.Load(), other.queries.Load())
	}
	if r := ask(t, "udp", addr, question("example.org.", dns.TypeA)); r.Rcode != dns.RcodeNameError || other.queries.Load() != 1 {
		t.Errorf("example.org: rcode %s, upstream asked %d; want NXDOMAIN from the upstream", dns.RcodeToString[r.Rcode], other.queries.Load())
	}
	if r := ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || stub.queries.Load()+other.queries.Load() != 2 {
		t.Errorf("a zone name: rcode %s, or it was forwarded", dns.RcodeToString[r.Rcode])
	}
	s.SetForwarding(nil)
	if r := ask(t, "udp", addr, question("example.com.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Errorf("after SetForwarding(nil): rcode %s, want REFUSED again", dns.RcodeToString[r.Rcode])
	}
}

// TestExternalNameResolved: an ExternalName Service's CNAME to a name outside
// the zone is followed where forwarding sends that name (here a stub
// domain), and the target's records follow the CNAME, with the target's
// rcode; a CNAME question gets the CNAME alone; without anywhere to forward,
// the CNAME alone.
func TestExternalNameResolved(t *testing.T) {
	store := model.NewStore()
	store.Update(func(tx *model.Txn) {
		fixture(tx)
		tx.SetService(&model.Service{Namespace: "default", Name: "ext", Type: model.ServiceTypeExternalName, ExternalName: "example.com"})
		tx.SetService(&model.Service{Namespace: "default", Name: "gone", Type: model.ServiceTypeExternalName, ExternalName: "nothing.example.com"})
		tx.SetSynced(true)
	})
	u := startUpstream(t)
	s, addr := start(t, ServerConfig{}, store)
	if r := ask(t, "udp", addr, question("ext.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("without upstreams: rcode %s, %d answers; want the CNAME alone", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	s.SetForwarding(&Forwarding{Stubs: map[string][]string{"example.com.": {u.addr}}})
	r := ask(t, "udp", addr, question("ext.default.svc.cluster.local.", dns.TypeA))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 || r.Answer[0].(*dns.CNAME).Target != "example.com." || !slices.Equal(answerData(r), []string{"192.0.2.1", "example.com."}) {
		t.Errorf("ext A: rcode %s, answer %v; want the CNAME, then example.com's A", dns.RcodeToString[r.Rcode], r.Answer)
	}
	if r := ask(t, "udp", addr, question("gone.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeNameError || len(r.Answer) != 1 {
		t.Errorf("gone A: rcode %s, %d answers; want NXDOMAIN (the target's) with the CNAME", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	before := u.queries.Load()
	if r := ask(t, "udp", addr, question("ext.default.svc.cluster.local.", dns.TypeCNAME)); len(r.Answer) != 1 || u.queries.Load() != before {
		t.Errorf("ext CNAME: %d answers, upstream asked %d times; want the CNAME alone, nothing forwarded", len(r.Answer), u.queries.Load()-before)
	}
}

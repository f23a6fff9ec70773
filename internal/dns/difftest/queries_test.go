package difftest

import (
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// TestFixtureNames checks the generated queries: at least 500, every name valid,
// every name kind present, deterministic for a seed and differing in case only
// between seeds.
func TestFixtureNames(t *testing.T) {
	f := NewFixture("")
	a, b, c := Generate(f, 1), Generate(f, 1), Generate(f, 2)
	if len(a) < 500 {
		t.Fatalf("%d queries, want at least 500", len(a))
	}
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave different queries")
	}
	caseDiffers := false
	for i := range a {
		if a[i].Key() != c[i].Key() {
			t.Fatalf("query %d: seeds differ in more than case: %s vs %s", i, a[i], c[i])
		}
		caseDiffers = caseDiffers || a[i].Name != c[i].Name
	}
	if !caseDiffers {
		t.Error("two seeds gave the same case everywhere")
	}
	names := Names(f)
	for _, want := range []string{
		"web.alpha.svc.cluster.local.",                                              // ClusterIP
		"_http._tcp.web.alpha.svc.cluster.local.",                                   // SRV, named port
		"_assoc._sctp.web.alpha.svc.cluster.local.",                                 // SCTP
		"_dns._udp.web.alpha.svc.cluster.local.",                                    // UDP
		"_tcp.single.alpha.svc.cluster.local.",                                      // unnamed port
		"hl-0.hl.alpha.svc.cluster.local.",                                          // headless hostname
		"192-168-1-12.hl.alpha.svc.cluster.local.",                                  // headless, no hostname
		"fd00-192-168-1--0.hl.alpha.svc.cluster.local.",                             // IPv6 ending in ::
		"4.10.96.10.in-addr.arpa.",                                                  // ClusterIP PTR
		"4.0.0.0.a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.f.ip6.arpa.", // IPv6 ClusterIP PTR
		"192-168-2-20.beta.pod.cluster.local.",                                      // Pod
		"fd00-192-168-2--20.beta.pod.cluster.local.",                                // IPv6 Pod
		"dns-version.cluster.local.", "cluster.local.", "delta.svc.cluster.local.", "nosuchns.svc.cluster.local.",
		"*.alpha.svc.cluster.local.", "example.com.", ".",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("no query for %s", want)
		}
	}
	for _, n := range names {
		if _, ok := dns.IsDomainName(n); !ok {
			t.Errorf("invalid name %q", n)
		}
	}
}

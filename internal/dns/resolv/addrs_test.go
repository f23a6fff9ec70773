package resolv

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

func TestLookupAddrsSearchesAAndAAAAPerName(t *testing.T) {
	f := startFake(t, map[string][]string{
		// A dual-stack headless pod record, one search domain down.
		"web-0.nginx-hl.default.svc.cluster.local.": {
			"web-0.nginx-hl.default.svc.cluster.local. 5 IN A 192.168.2.5",
			"web-0.nginx-hl.default.svc.cluster.local. 5 IN AAAA fd00:192:168:2::5",
		},
		// Exists without addresses: NODATA for both types.
		"web-0.nginx-hl.svc.cluster.local.": {"web-0.nginx-hl.svc.cluster.local. 5 IN TXT \"x\""},
	})
	got, err := labConfig(f.addr).LookupAddrs(context.Background(), "web-0.nginx-hl")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("192.168.2.5"), netip.MustParseAddr("fd00:192:168:2::5")}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("addresses (-want +got):\n%s", d)
	}
	// One dot, fewer than ndots 5: the search list first; the first name
	// with an address answers, asked A then AAAA.
	wantQ := []string{
		"web-0.nginx-hl.default.svc.cluster.local. A udp",
		"web-0.nginx-hl.default.svc.cluster.local. AAAA udp",
	}
	if d := cmp.Diff(wantQ, f.questions()); d != "" {
		t.Errorf("questions asked (-want +got):\n%s", d)
	}
}

func TestLookupAddrsNotFoundNamesEveryNameTried(t *testing.T) {
	f := startFake(t, map[string][]string{
		"nosuch.svc.cluster.local.": {"nosuch.svc.cluster.local. 5 IN TXT \"x\""},
	})
	_, err := labConfig(f.addr).LookupAddrs(context.Background(), "nosuch")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("error %v, want a *NotFoundError", err)
	}
	want := "nosuch A/AAAA: no answer; tried nosuch.default.svc.cluster.local. (NXDOMAIN), nosuch.svc.cluster.local. (NODATA), " +
		"nosuch.cluster.local. (NXDOMAIN), nosuch. (NXDOMAIN)"
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
	// A name answered NXDOMAIN for A is not asked for AAAA.
	wantQ := []string{
		"nosuch.default.svc.cluster.local. A udp",
		"nosuch.svc.cluster.local. A udp",
		"nosuch.svc.cluster.local. AAAA udp",
		"nosuch.cluster.local. A udp",
		"nosuch. A udp",
	}
	if d := cmp.Diff(wantQ, f.questions()); d != "" {
		t.Errorf("questions asked (-want +got):\n%s", d)
	}
}

func TestLookupAddrsNdotsAndTrailingDot(t *testing.T) {
	f := startFake(t, map[string][]string{
		"a.b.c.d.e.example.":             {"a.b.c.d.e.example. 5 IN A 10.0.0.1"},
		"web.default.svc.cluster.local.": {"web.default.svc.cluster.local. 5 IN A 10.96.0.20"},
	})
	ctx := context.Background()
	// Five dots, ndots 5: as is first.
	if _, err := labConfig(f.addr).LookupAddrs(ctx, "a.b.c.d.e.example"); err != nil {
		t.Fatal(err)
	}
	// A trailing dot: only the name itself.
	if _, err := labConfig(f.addr).LookupAddrs(ctx, "web.default.svc.cluster.local."); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a.b.c.d.e.example. A udp", "a.b.c.d.e.example. AAAA udp",
		"web.default.svc.cluster.local. A udp", "web.default.svc.cluster.local. AAAA udp",
	}
	if d := cmp.Diff(want, f.questions()); d != "" {
		t.Errorf("questions asked (-want +got):\n%s", d)
	}
}

// recordingDial sends every connection to the fake server, whatever address
// it is asked for, and records the addresses asked.
type recordingDial struct {
	to    string
	mu    sync.Mutex
	asked []string
}

func (d *recordingDial) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.asked = append(d.asked, network+" "+address)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, d.to)
}

func TestDialCarriesEveryQuery(t *testing.T) {
	name := "big.default.svc.cluster.local."
	var lines []string
	for range 60 {
		lines = append(lines, name+" 5 IN A 10.1.0.1")
	}
	f := startFake(t, map[string][]string{name: lines})
	d := &recordingDial{to: f.addr}
	cfg := labConfig("10.96.0.10:53")
	cfg.Dial = d.dial
	// Truncated over UDP, asked again over TCP: both through Dial, framed by
	// the connection's type.
	r, err := cfg.Lookup(context.Background(), "big", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 60 {
		t.Errorf("got %d records, want 60", len(r.Answer))
	}
	if d := cmp.Diff([]string{"udp 10.96.0.10:53", "tcp 10.96.0.10:53"}, d.asked); d != "" {
		t.Errorf("dials (-want +got):\n%s", d)
	}
}

func TestDialErrorNamesTheServer(t *testing.T) {
	cfg := labConfig("10.96.0.10:53")
	cfg.Dial = func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("network is unreachable")
	}
	_, err := cfg.LookupAddrs(context.Background(), "web.default.svc.cluster.local.")
	if err == nil || !strings.Contains(err.Error(), "web.default.svc.cluster.local. (no answer: 10.96.0.10:53 over udp: network is unreachable)") {
		t.Errorf("error %v, want the name, the server and the reason", err)
	}
}

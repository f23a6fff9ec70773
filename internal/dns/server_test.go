package dns

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/logtest"
	"github.com/svcnet/svcnet/internal/model"
)

// bigEndpoints is the size of the headless Service "big": its A answer (about
// 1.6 kB) does not fit 512 bytes.
const bigEndpoints = 100

// fixture is a ClusterIP Service default/my-nginx (10.96.0.20, port http 80)
// and a headless Service default/big with bigEndpoints ready endpoints.
func fixture(tx *model.Txn) {
	tx.SetService(&model.Service{Namespace: "default", Name: "my-nginx", Type: model.ServiceTypeClusterIP,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.20")}, IPFamilies: []ipfamily.Family{ipfamily.IPv4},
		Ports: []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80, TargetPort: 80}}})
	tx.SetService(&model.Service{Namespace: "default", Name: "big", Type: model.ServiceTypeClusterIP, Headless: true,
		IPFamilies: []ipfamily.Family{ipfamily.IPv4},
		Ports:      []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80, TargetPort: 8080}}})
	sl := &model.EndpointSlice{Namespace: "default", Name: "big-1", Service: "big", AddressType: ipfamily.IPv4, Headless: true,
		Ports: []model.EndpointPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}}}
	for i := range bigEndpoints {
		sl.Endpoints = append(sl.Endpoints, model.Endpoint{
			Addresses: []netip.Addr{netip.AddrFrom4([4]byte{192, 168, 1, byte(i + 1)})}, Ready: true, Serving: true})
	}
	tx.SetEndpointSlice(sl)
}

// syncedStore returns a synced store holding the fixture.
func syncedStore() *model.Store {
	s := model.NewStore()
	s.Update(func(tx *model.Txn) { fixture(tx); tx.SetSynced(true) })
	return s
}

// start runs a server for store on a free loopback port until the test ends
// and returns it with its address, once it answers from the store when the
// store is synced.
func start(t *testing.T, cfg ServerConfig, store *model.Store) (*Server, string) {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = (&logtest.Sink{}).Logger(0)
	}
	s, err := NewServer(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	select {
	case <-s.Started():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not start")
	}
	if store.Snapshot().Synced {
		if took, ok := waitFor(5*time.Second, s.Ready); !ok {
			t.Fatalf("server not ready %v after start with a synced store", took)
		}
	}
	return s, s.Addr().String()
}

// question returns a recursive query without EDNS0.
func question(name string, qtype uint16) *dns.Msg {
	return new(dns.Msg).SetQuestion(name, qtype)
}

// ask sends m over network ("udp" or "tcp") without retrying and returns the
// answer.
func ask(t *testing.T, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 3 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], network, err)
	}
	return r
}

// waitFor polls cond every 2 ms until it holds or timeout passes; it returns
// how long that took and whether cond held.
func waitFor(timeout time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for i := 0; i < 100000; i++ {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > timeout {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start), false
}

// answerData returns the answer section's data, sorted.
func answerData(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		out = append(out, rr.String()[len(rr.Header().String()):])
	}
	slices.Sort(out)
	return out
}

// histogramCount returns how many observations h holds.
func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// get returns the status and body of an HTTP GET of path on h.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestStartupServfailUntilSyncedThenAnswers(t *testing.T) {
	store := model.NewStore()
	var logs logtest.Sink
	s, addr := start(t, ServerConfig{SyncTimeout: 50 * time.Millisecond, Logger: logs.Logger(0)}, store)
	h := NewHTTPHandler(s.Metrics(), s.Ready)

	for _, network := range []string{"udp", "tcp"} {
		r := ask(t, network, addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA))
		if r.Rcode != dns.RcodeServerFailure {
			t.Errorf("before sync over %s: rcode %s, want SERVFAIL", network, dns.RcodeToString[r.Rcode])
		}
	}
	// Names outside the zone do not depend on the model: refused at once.
	if r := ask(t, "udp", addr, question("example.com.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Errorf("outside name before sync: rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if code, _ := get(t, h, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz before sync: %d, want 503", code)
	}
	// Past the sync timeout the server keeps SERVFAIL and says so, loudly.
	if _, ok := waitFor(5*time.Second, func() bool { return logs.Count("has not synced") >= 2 }); !ok {
		t.Errorf("no repeated error about the missing sync in the log: %q", logs.Lines())
	}
	if r := ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("after the sync timeout: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}

	// Objects without the sync mark are not served yet.
	store.Update(fixture)
	time.Sleep(20 * time.Millisecond)
	if r := ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("objects without sync: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	store.Update(func(tx *model.Txn) { tx.SetSynced(true) })
	var r *dns.Msg
	if took, ok := waitFor(time.Second, func() bool {
		r = ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA))
		return r.Rcode == dns.RcodeSuccess
	}); !ok {
		t.Fatalf("not answered %v after sync: rcode %s", took, dns.RcodeToString[r.Rcode])
	}
	if got := answerData(r); !slices.Equal(got, []string{"10.96.0.20"}) || !r.Authoritative {
		t.Errorf("answer %v (aa %v), want 10.96.0.20, authoritative", got, r.Authoritative)
	}
	if code, body := get(t, h, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after sync: %d %q, want 200", code, body)
	}
	if logs.Count("Source synced") != 1 {
		t.Errorf("no log line about the sync: %q", logs.Lines())
	}
	// Losing the sync mark (a source relisting) keeps the last synced answers.
	store.Update(func(tx *model.Txn) { tx.SetSynced(false) })
	time.Sleep(20 * time.Millisecond)
	if r := ask(t, "udp", addr, question("my-nginx.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("after the source lost its sync: rcode %s, want NOERROR from the last synced model", dns.RcodeToString[r.Rcode])
	}
	// What changed while it was lost is served once it is back: the view
	// is updated with every Service changed since the last one.
	store.Update(func(tx *model.Txn) {
		tx.SetService(&model.Service{Namespace: "default", Name: "while-lost", Type: model.ServiceTypeClusterIP,
			ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.77")}, IPFamilies: []ipfamily.Family{ipfamily.IPv4},
			Ports: []model.ServicePort{{Protocol: model.ProtocolTCP, Port: 80, TargetPort: 80}}})
	})
	time.Sleep(20 * time.Millisecond)
	store.Update(func(tx *model.Txn) { tx.SetSynced(true) })
	if took, ok := waitFor(time.Second, func() bool {
		r = ask(t, "udp", addr, question("while-lost.default.svc.cluster.local.", dns.TypeA))
		return r.Rcode == dns.RcodeSuccess && slices.Equal(answerData(r), []string{"10.96.0.77"})
	}); !ok {
		t.Errorf("a Service added while the sync was lost: not answered %v after the sync came back: rcode %s", took, dns.RcodeToString[r.Rcode])
	}
}

// TestChangeAnsweredWithin100ms: each change of the model is answered within
// 100 ms (measured from the store update to the first answer reflecting it),
// and each records a programming latency.
func TestChangeAnsweredWithin100ms(t *testing.T) {
	store := syncedStore()
	s, addr := start(t, ServerConfig{}, store)
	before := histogramCount(t, s.Metrics().ProgrammingDuration)
	const changes = 5
	var worst time.Duration
	for i := range changes {
		name := fmt.Sprintf("svc-%d", i)
		ip := netip.AddrFrom4([4]byte{10, 96, 1, byte(i + 1)})
		store.Update(func(tx *model.Txn) {
			tx.SetService(&model.Service{Namespace: "default", Name: name, Type: model.ServiceTypeClusterIP,
				ClusterIPs: []netip.Addr{ip}, IPFamilies: []ipfamily.Family{ipfamily.IPv4},
				Ports: []model.ServicePort{{Protocol: model.ProtocolTCP, Port: 80, TargetPort: 80}}})
		})
		took, ok := waitFor(2*time.Second, func() bool {
			r := ask(t, "udp", addr, question(name+".default.svc.cluster.local.", dns.TypeA))
			return r.Rcode == dns.RcodeSuccess && slices.Equal(answerData(r), []string{ip.String()})
		})
		if !ok {
			t.Fatalf("change %d not answered after %v", i, took)
		}
		worst = max(worst, took)
	}
	t.Logf("worst change-to-answer latency over %d changes: %v", changes, worst)
	if worst > 100*time.Millisecond {
		t.Errorf("a change took %v to be answered, want at most 100ms", worst)
	}
	if got := histogramCount(t, s.Metrics().ProgrammingDuration) - before; got < 1 || got > changes {
		t.Errorf("%d programming latencies recorded for %d changes, want 1..%d (changes may coalesce)", got, changes, changes)
	}
}

func TestListenSamePortOnBothTransports(t *testing.T) {
	pc, l, err := listenPair(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	defer l.Close()
	up, tp := pc.LocalAddr().(*net.UDPAddr).Port, l.Addr().(*net.TCPAddr).Port
	if up != tp || up == 0 {
		t.Errorf("udp port %d, tcp port %d: want one port", up, tp)
	}
	// A fixed port taken on TCP is an error, not another port.
	_, _, err = listenPair(context.Background(), l.Addr().String())
	if err == nil {
		t.Errorf("listening on a taken port: no error")
	}
}

func TestNewServerValidates(t *testing.T) {
	for _, cfg := range []ServerConfig{
		{Listen: "no-port"},
		{Zone: "in-addr.arpa"},
		{Zone: "a..b"},
		{Upstreams: []string{"dns.google"}},
		{Upstreams: []string{"10.0.0.1:0"}},
	} {
		if _, err := NewServer(cfg, model.NewStore()); err == nil {
			t.Errorf("NewServer(%+v): no error", cfg)
		}
	}
	s, err := NewServer(ServerConfig{}, model.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Listen != ":53" || s.cfg.Zone != "cluster.local" || s.cfg.TTL != 5 || s.cfg.SyncTimeout != 30*time.Second || s.Addr() != nil || s.Ready() {
		t.Errorf("defaults: %+v, addr %v, ready %v", s.cfg, s.Addr(), s.Ready())
	}
}

func TestParseServerAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.96.0.10":        "10.96.0.10:53",
		"10.96.0.10:5353":   "10.96.0.10:5353",
		"fd00::10":          "[fd00::10]:53",
		"[fd00::10]:53":     "[fd00::10]:53",
		"[fd00::10]:1053":   "[fd00::10]:1053",
		"dns.example":       "",
		"dns.example:53":    "",
		"10.96.0.10:99999":  "",
		"10.96.0.10:domain": "",
	} {
		got, err := ParseServerAddr(in)
		if want == "" {
			if err == nil {
				t.Errorf("ParseServerAddr(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseServerAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

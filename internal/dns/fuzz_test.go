package dns

import (
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/zone"
	"github.com/svcnet/svcnet/internal/logtest"
)

// captureWriter is a dns.ResponseWriter that keeps the packed answer.
type captureWriter struct {
	remote net.Addr
	out    []byte
}

func (w *captureWriter) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (w *captureWriter) RemoteAddr() net.Addr { return w.remote }
func (w *captureWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	w.out = b
	return nil
}
func (w *captureWriter) Write(b []byte) (int, error) {
	w.out = append([]byte(nil), b...)
	return len(b), nil
}
func (w *captureWriter) Close() error        { return nil }
func (w *captureWriter) TsigStatus() error   { return nil }
func (w *captureWriter) TsigTimersOnly(bool) {}
func (w *captureWriter) Hijack()             {}

// FuzzServeDNS: any packet that the dns library parses into a query goes
// through ServeDNS without panicking, and the answer packs, parses, carries
// the query's ID and fits the transport's limit (512 bytes over UDP without
// EDNS0, the advertised size with it).
func FuzzServeDNS(f *testing.F) {
	seeds := []*dns.Msg{
		question("my-nginx.default.svc.cluster.local.", dns.TypeA),
		withEDNS(question(bigName, dns.TypeA), 1232, true),
		question("_http._tcp.my-nginx.default.svc.cluster.local.", dns.TypeSRV),
		question("20.0.96.10.in-addr.arpa.", dns.TypePTR),
		question("example.com.", dns.TypeA),
	}
	for _, m := range seeds {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
	}
	s, err := NewServer(ServerConfig{Logger: (&logtest.Sink{}).Logger(0)}, syncedStore())
	if err != nil {
		f.Fatal(err)
	}
	s.view.Store(zone.Build(s.zoneCfg, syncedStore().Snapshot()))
	f.Fuzz(func(t *testing.T, b []byte, udp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil || req.Response {
			return // the library answers FORMERR or drops it
		}
		w := &captureWriter{remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5353}}
		limit := dns.MaxMsgSize
		if udp {
			w.remote = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5353}
			limit = dns.MinMsgSize
			if opt, ok := requestOPT(req); ok && opt != nil {
				limit = max(int(opt.UDPSize()), dns.MinMsgSize)
			}
		}
		s.ServeDNS(w, req)
		if w.out == nil {
			t.Fatalf("no answer written for %v", req)
		}
		if len(w.out) > limit {
			t.Errorf("answer of %d bytes over the limit %d", len(w.out), limit)
		}
		resp := new(dns.Msg)
		if err := resp.Unpack(w.out); err != nil {
			t.Fatalf("answer does not parse: %v", err)
		}
		if resp.Id != req.Id || !resp.Response {
			t.Errorf("answer id %d response %v, query id %d", resp.Id, resp.Response, req.Id)
		}
	})
}

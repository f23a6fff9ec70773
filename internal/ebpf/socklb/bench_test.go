package socklb

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/model"
)

// fillServices sets n TCP frontends 10.97.x.y:80 with one backend each, so a
// benchmark runs against maps of a realistic size.
func fillServices(b *testing.B, lb *LB, n int) {
	b.Helper()
	for i := range n {
		fe := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)}), 80)
		be := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 168, byte(i >> 8), byte(i)}), 8080)
		if err := lb.SetService(fe, model.ProtocolTCP, []netip.AddrPort{be}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConnect times a TCP connect (socket, connect, close with an RST)
// from a process in the cgroup to a frontend that connect4 translates to one
// backend, and to that backend directly, interleaved in the same process.
// ns/op is the translated connect, direct-ns/op the direct one (means), and
// excess-ns/op the cost of the program: the median over rounds of 200
// connects to each of the difference of their means. ipv6 is the same with
// one Service over IPv6.
func BenchmarkConnect(b *testing.B) {
	for _, services := range []int{1, 10000} {
		b.Run(fmt.Sprintf("services=%d", services), func(b *testing.B) {
			h := newHarness(b)
			h.serveTCP(b, be1, "be1")
			fillServices(b, h.lb, services-1)
			if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, []netip.AddrPort{mustAP(be1)}); err != nil {
				b.Fatal(err)
			}
			benchClient(b, h, vip, be1)
		})
	}
	b.Run("ipv6", func(b *testing.B) {
		h := newHarness(b)
		h.addLoopback(b, "fd00:1::2/128")
		h.serveTCP(b, be61, "be1")
		if err := h.lb.SetService(mustAP(vip6), model.ProtocolTCP, []netip.AddrPort{mustAP(be61)}); err != nil {
			b.Fatal(err)
		}
		benchClient(b, h, vip6, be61)
	})
}

// benchClient runs the bench operation for b.N connects to frontend and to
// backend and reports its figures.
func benchClient(b *testing.B, h *harness, frontend, backend string) {
	b.Helper()
	out := h.client(b, "bench", frontend, backend, strconv.Itoa(b.N))
	var r cgrouptest.BenchResult
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("client output %q: %v", out, err)
	}
	b.ReportMetric(r.NsPerConnect[0], "ns/op")
	b.ReportMetric(r.NsPerConnect[1], "direct-ns/op")
	b.ReportMetric(r.MedianDiffNs, "excess-ns/op")
}

// BenchmarkSetService times one change of a Service's backends (two
// backends replaced by two others) among 10000 Services, with a Reap after
// every reapEvery changes, as a sync loop would after a batch: ns/op is a
// change with its share of a Reap.
func BenchmarkSetService(b *testing.B) {
	for _, reapEvery := range []int{1, 100} {
		b.Run(fmt.Sprintf("reap-every=%d", reapEvery), func(b *testing.B) {
			h := newHarness(b)
			fillServices(b, h.lb, 9999)
			sets := [2][]netip.AddrPort{
				{mustAP("192.168.200.1:8080"), mustAP("192.168.200.2:8080")},
				{mustAP("192.168.200.3:8080"), mustAP("192.168.200.4:8080")},
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, sets[i%2]); err != nil {
					b.Fatal(err)
				}
				if i%reapEvery == reapEvery-1 {
					if err := h.lb.Reap(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

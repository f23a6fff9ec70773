package socklb

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/model"
	"golang.org/x/sys/unix"
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

// progCost is what the kernel accounted to the socket load balancer's
// programs (BPF_ENABLE_STATS run time) over some connects.
type progCost struct{ connect, getpeername, release time.Duration }

func readProgCost(b *testing.B, lb *LB) progCost {
	b.Helper()
	var c progCost
	for _, p := range []struct {
		prog *ebpf.Program
		to   *time.Duration
	}{{lb.objs.SocklbConnect4, &c.connect}, {lb.objs.SocklbGetpeername4, &c.getpeername}, {lb.objs.SocklbRelease, &c.release}} {
		st, err := p.prog.Stats()
		if err != nil {
			b.Fatal(err)
		}
		*p.to = st.Runtime
	}
	return c
}

// BenchmarkProgramCost reports the run time the kernel accounts to the
// programs (connect4, getpeername4, sock_release) per TCP connect, close
// included, from a Go client (which calls getpeername after connect) among
// 10000 Services: to a frontend (frontend-ns/op), directly to its backend
// (direct-ns/op, where the programs look up and pass), and their
// difference (excess-ns/op): the work a translated connect costs beyond an
// untranslated one, without the noise of the connect itself that
// BenchmarkConnect's excess carries. Statistics are on only while it runs.
func BenchmarkProgramCost(b *testing.B) {
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enable BPF run time statistics: %v", err)
	}
	defer stats.Close()
	h := newHarness(b)
	h.serveTCP(b, be1, "be1")
	fillServices(b, h.lb, 9999)
	if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, []netip.AddrPort{mustAP(be1)}); err != nil {
		b.Fatal(err)
	}
	const perRound = 500
	var spent [2]progCost
	rounds := 0
	for b.Loop() {
		for i, to := range []string{vip, be1} {
			before := readProgCost(b, h.lb)
			h.dial(b, "tcp", to, perRound)
			after := readProgCost(b, h.lb)
			spent[i].connect += after.connect - before.connect
			spent[i].getpeername += after.getpeername - before.getpeername
			spent[i].release += after.release - before.release
		}
		rounds++
	}
	per := func(c progCost) float64 {
		return float64((c.connect + c.getpeername + c.release).Nanoseconds()) / float64(rounds*perRound)
	}
	for i, name := range []string{"frontend", "direct"} {
		b.ReportMetric(float64(spent[i].connect.Nanoseconds())/float64(rounds*perRound), name+"-connect4-ns/op")
		b.ReportMetric(float64(spent[i].release.Nanoseconds())/float64(rounds*perRound), name+"-release-ns/op")
		b.ReportMetric(per(spent[i]), name+"-ns/op")
	}
	b.ReportMetric(per(spent[0])-per(spent[1]), "excess-ns/op")
	b.ReportMetric(0, "ns/op")
}

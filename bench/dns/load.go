package dnsbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
)

// LoadConfig describes a query load against one server.
type LoadConfig struct {
	// Addr is the server's UDP address.
	Addr string
	// Sockets is the number of UDP sockets (source ports), default 4; InFlight
	// the queries outstanding on each, default 32.
	Sockets, InFlight int
	// Names are asked for A and must be answered NOERROR with a record;
	// Missing names must be answered NXDOMAIN. Every MissingEvery-th query
	// (default 50) is for a missing name.
	Names, Missing []string
	MissingEvery   int
	// Warmup is sent before the measurement starts and not counted (default
	// 1s); Duration is the measurement (default 10s).
	Warmup, Duration time.Duration
	// Timeout is when an unanswered query counts as lost (default 1s).
	Timeout time.Duration
}

func (c LoadConfig) withDefaults() LoadConfig {
	if c.Sockets <= 0 {
		c.Sockets = 4
	}
	if c.InFlight <= 0 {
		c.InFlight = 32
	}
	if c.MissingEvery <= 0 {
		c.MissingEvery = 50
	}
	if c.Warmup <= 0 {
		c.Warmup = time.Second
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	return c
}

// Stats is the outcome of one measurement. Answered, Wrong and Latencies
// count the answers received within the measured interval; Lost counts the
// queries sent in it that were never answered within the timeout.
type Stats struct {
	Answered, Wrong, Lost int64
	Elapsed               time.Duration
	// Latencies are in microseconds, sorted.
	Latencies []uint32
	// FirstWrong describes the first wrong answer, if any.
	FirstWrong string
}

// QPS is the answers per second of the measured interval.
func (s Stats) QPS() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Answered) / s.Elapsed.Seconds()
}

// Percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) latency.
func (s Stats) Percentile(p float64) time.Duration {
	return percentile(s.Latencies, p)
}

func percentile(sorted []uint32, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return time.Duration(sorted[rank]) * time.Microsecond
}

// Merge adds o to s (latencies stay sorted).
func (s *Stats) Merge(o Stats) {
	s.Answered += o.Answered
	s.Wrong += o.Wrong
	s.Lost += o.Lost
	s.Elapsed += o.Elapsed
	s.Latencies = append(s.Latencies, o.Latencies...)
	slices.Sort(s.Latencies)
	if s.FirstWrong == "" {
		s.FirstWrong = o.FirstWrong
	}
}

// Expected answers, by query kind.
const (
	kindName    = 1 // NOERROR with at least one answer
	kindMissing = 2 // NXDOMAIN
)

// Load runs cfg's load: Warmup, then Duration measured, then it waits (at most
// Timeout) for the last answers; it stops sending early when ctx ends. It
// returns an error only for a socket error; wrong and lost answers are in
// Stats.
func Load(ctx context.Context, cfg LoadConfig) (Stats, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Names) == 0 || len(cfg.Missing) == 0 {
		return Stats{}, errors.New("load: no names to ask")
	}
	names, err := packAll(cfg.Names)
	if err != nil {
		return Stats{}, err
	}
	missing, err := packAll(cfg.Missing)
	if err != nil {
		return Stats{}, err
	}
	raddr, err := net.ResolveUDPAddr("udp", cfg.Addr)
	if err != nil {
		return Stats{}, fmt.Errorf("load: %w", err)
	}
	start := time.Now()
	w := window{from: start.Add(cfg.Warmup), to: start.Add(cfg.Warmup + cfg.Duration)}
	socks := make([]*socket, cfg.Sockets)
	for i := range socks {
		conn, err := net.DialUDP("udp", nil, raddr)
		if err != nil {
			for _, s := range socks[:i] {
				s.conn.Close()
			}
			return Stats{}, fmt.Errorf("load: %w", err)
		}
		_ = conn.SetReadBuffer(4 << 20)
		socks[i] = &socket{conn: conn, cfg: cfg, w: w, names: names, missing: missing,
			rng: rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(socks))
	for i, s := range socks {
		wg.Go(func() { errs[i] = s.run(ctx) })
	}
	wg.Wait()
	var st Stats
	for _, s := range socks {
		st.Answered += s.answered
		st.Wrong += s.wrong
		st.Lost += s.lost
		st.Latencies = append(st.Latencies, s.lat...)
		if st.FirstWrong == "" {
			st.FirstWrong = s.firstWrong
		}
	}
	slices.Sort(st.Latencies)
	st.Elapsed = w.to.Sub(w.from)
	return st, errors.Join(errs...)
}

// window is the measured interval.
type window struct{ from, to time.Time }

func (w window) in(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

// packAll packs an A query for each name (ID 0, RD set, no EDNS: the smallest
// common stub query).
func packAll(names []string) ([][]byte, error) {
	out := make([][]byte, len(names))
	for i, n := range names {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(n), dns.TypeA)
		m.Id = 0
		b, err := m.Pack()
		if err != nil {
			return nil, fmt.Errorf("load: pack %s: %w", n, err)
		}
		out[i] = b
	}
	return out, nil
}

// socket is one UDP socket driven by one goroutine: it sends as many queries
// as there are free in-flight slots in one sendmmsg, reads every answer waiting
// in one recvmmsg, and every 50ms frees the slots of queries unanswered after
// Timeout. Batching keeps the generator's system calls far below the server's,
// so that the server, not the generator, is the bottleneck. sent[id] is the
// send time (UnixNano) of the outstanding query with that ID, 0 when free.
type socket struct {
	conn           *net.UDPConn
	pc             *ipv4.PacketConn
	cfg            LoadConfig
	w              window
	names, missing [][]byte
	rng            *rand.Rand

	sent        [1 << 16]int64
	kind        [1 << 16]uint8
	outstanding int
	nextID      uint16
	count       int

	answered, wrong, lost int64
	lat                   []uint32
	firstWrong            string
}

// readWait bounds one wait for answers, so that sending and reaping go on.
const readWait = 5 * time.Millisecond

func (s *socket) run(ctx context.Context) error {
	defer s.conn.Close()
	s.pc = ipv4.NewPacketConn(s.conn)
	wms := make([]ipv4.Message, s.cfg.InFlight)
	for i := range wms {
		wms[i].Buffers = [][]byte{make([]byte, 0, 512)}
	}
	rms := make([]ipv4.Message, s.cfg.InFlight)
	for i := range rms {
		rms[i].Buffers = [][]byte{make([]byte, 4096)}
	}
	stop := s.w.to.Add(s.cfg.Timeout) // the last answers may arrive until then
	lastReap := time.Now()
	for {
		now := time.Now()
		sending := ctx.Err() == nil && now.Before(s.w.to)
		if !sending && (s.outstanding == 0 || now.After(stop)) {
			return nil
		}
		if sending && s.outstanding < s.cfg.InFlight {
			if err := s.send(wms[:s.cfg.InFlight-s.outstanding], now); err != nil {
				return err
			}
		}
		if err := s.conn.SetReadDeadline(now.Add(readWait)); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		n, err := s.pc.ReadBatch(rms, 0)
		if err != nil && !isTimeout(err) && !isRefused(err) {
			return fmt.Errorf("load: read from %s: %w", s.cfg.Addr, err)
		}
		at := time.Now()
		for i := range n {
			s.receive(rms[i].Buffers[0][:rms[i].N], at)
		}
		if at.Sub(lastReap) >= 50*time.Millisecond {
			s.reap(at)
			lastReap = at
		}
	}
}

// send fills ms with new queries (one per free slot) and writes them.
func (s *socket) send(ms []ipv4.Message, now time.Time) error {
	for i := range ms {
		// A free ID: at most InFlight of 65536 are outstanding, so this
		// ends within InFlight+1 steps.
		for s.sent[s.nextID] != 0 {
			s.nextID++
		}
		id := s.nextID
		s.nextID++
		s.count++
		kind, q := uint8(kindName), s.names
		if s.count%s.cfg.MissingEvery == 0 {
			kind, q = kindMissing, s.missing
		}
		b := append(ms[i].Buffers[0][:0], q[s.rng.IntN(len(q))]...)
		binary.BigEndian.PutUint16(b, id)
		ms[i].Buffers[0] = b
		s.sent[id], s.kind[id] = now.UnixNano(), kind
		s.outstanding++
	}
	for tries := 0; len(ms) > 0; tries++ {
		n, err := s.pc.WriteBatch(ms, 0)
		if err != nil && !isRefused(err) {
			return fmt.Errorf("load: send to %s: %w", s.cfg.Addr, err)
		}
		if tries == 100 {
			return fmt.Errorf("load: send to %s: %d queries not sent after 100 tries", s.cfg.Addr, len(ms))
		}
		ms = ms[n:]
	}
	return nil
}

// receive accounts one answer received at at.
func (s *socket) receive(b []byte, at time.Time) {
	if len(b) < 12 {
		return
	}
	id := binary.BigEndian.Uint16(b)
	t0 := s.sent[id]
	if t0 == 0 {
		return // late (already counted lost) or not ours
	}
	s.sent[id] = 0
	s.outstanding--
	if !s.w.in(at) {
		return
	}
	s.answered++
	d := at.Sub(time.Unix(0, t0)) / time.Microsecond
	s.lat = append(s.lat, uint32(min(d, 1<<32-1)))
	if why := checkAnswer(b, s.kind[id]); why != "" {
		s.wrong++
		if s.firstWrong == "" {
			s.firstWrong = why
		}
	}
}

// checkAnswer returns why an answer is wrong for its query kind, or "".
func checkAnswer(b []byte, kind uint8) string {
	rcode := int(b[3] & 0x0f)
	ancount := binary.BigEndian.Uint16(b[6:])
	switch {
	case kind == kindName && (rcode != dns.RcodeSuccess || ancount == 0):
		return fmt.Sprintf("existing name answered %s with %d records", dns.RcodeToString[rcode], ancount)
	case kind == kindMissing && rcode != dns.RcodeNameError:
		return fmt.Sprintf("missing name answered %s, want NXDOMAIN", dns.RcodeToString[rcode])
	}
	return ""
}

// reap frees the slots of queries unanswered after Timeout, counting those
// sent within the measured interval as lost.
func (s *socket) reap(now time.Time) {
	limit := now.Add(-s.cfg.Timeout).UnixNano()
	for id, t0 := range s.sent {
		if t0 == 0 || t0 > limit {
			continue
		}
		s.sent[id] = 0
		s.outstanding--
		if s.w.in(time.Unix(0, t0)) {
			s.lost++
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isRefused reports the ICMP port-unreachable error a connected UDP socket
// gets when nothing listens.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

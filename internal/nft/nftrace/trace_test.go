package nftrace

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

const armTable = "svcnet-trace"

// step is an event reduced to what the tracer compares with its simulation:
// where it happened, its kind ("rule", "end" of chain, "policy"), its
// verdict, the rule's index in its chain (-1 for end and policy) and the mark.
type step struct {
	Table, Chain string
	Kind         string
	Verdict      string
	Index        int
	Mark         uint32
}

// steps reduces evs, mapping handles to indexes with the tables' handles,
// and checks each event's type against the kinds the package doc allows.
func steps(t *testing.T, evs []Event, handles map[string]Handles) []step {
	t.Helper()
	out := make([]step, 0, len(evs))
	for _, e := range evs {
		s := step{Table: e.Table, Chain: e.Chain, Verdict: e.Verdict.String(), Index: -1, Mark: e.Mark}
		switch {
		case e.Type == TypePolicy:
			s.Kind, s.Verdict = "policy", e.Policy.String()
		case e.EndOfChain():
			s.Kind = "end"
			if e.Type != TypeRule && e.Type != TypeReturn {
				t.Errorf("end-of-chain event of type %s: %s", e.Type, e)
			}
		default:
			s.Kind = "rule"
			s.Index = handles[e.Table].Index(e.Chain, e.Handle)
			if e.Type != TypeRule && !(e.Type == TypeReturn && e.Verdict.Code == Return) {
				t.Errorf("rule event of type %s: %s", e.Type, e)
			}
		}
		out = append(out, s)
	}
	return out
}

// readHandles reads the handles of the node's tables.
func readHandles(t *testing.T, l *lab) map[string]Handles {
	t.Helper()
	out := map[string]Handles{}
	for _, name := range []string{"svc", armTable} {
		h, err := RuleHandles(l.node, ipfamily.IPv4, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = h
	}
	return out
}

var serviceMatches = []Match{
	{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Dst: netip.MustParsePrefix("10.96.0.10/32"), Dport: 80},
	{Family: ipfamily.IPv4, Proto: nft.ProtoUDP, Dst: netip.MustParsePrefix("10.96.0.10/32"), Dport: 53},
}

func logEvents(t *testing.T, evs []Event) {
	t.Helper()
	for _, e := range evs {
		t.Log(e)
	}
}

// TestTraceTCPPrerouting connects from the client to the Service over the veth
// pair and checks, on the node, the SYN's exact path through the armed raw
// chain, the nat prerouting chain (verdict map jump, DNAT) and the input
// filter chain, with the tuple before and after DNAT; and that the
// connection's later packets skip the nat chains.
func TestTraceTCPPrerouting(t *testing.T) {
	l := newLab(t)
	lis := listen(t, l.node)
	a := arm(t, l.node, armTable, serviceMatches...)
	src := connect(t, l.cli, "10.96.0.10:80")
	evs := collect(t, lis)
	logEvents(t, evs)
	pkts := a.Packets(evs)
	if len(pkts) < 2 {
		t.Fatalf("want the SYN and later packets of the connection, got %d packets", len(pkts))
	}
	syn := pkts[0]
	want := []step{
		{armTable, "prerouting", "rule", "continue", 0, 0},
		{armTable, "prerouting", "end", "continue", -1, 0},
		{armTable, "prerouting", "policy", "accept", -1, 0},
		{"svc", "nat-prerouting", "rule", "jump services", 0, 0},
		{"svc", "services", "rule", "jump svc-web", 0, 0},
		{"svc", "svc-web", "rule", "accept", 0, 0},
		{"svc", "filter-input", "rule", "jump checks", 0, 0},
		{"svc", "checks", "end", "continue", -1, 0},
		{"svc", "filter-input", "rule", "continue", 1, 0x4000},
		{"svc", "filter-input", "rule", "jump ep-web", 2, 0x4000},
		{"svc", "ep-web", "rule", "continue", 0, 0x4000},
		{"svc", "ep-web", "rule", "return", 1, 0x4000},
		{"svc", "filter-input", "rule", "accept", 3, 0x4000},
	}
	if diff := cmp.Diff(want, steps(t, syn, readHandles(t, l))); diff != "" {
		t.Fatalf("SYN steps (-want +got):\n%s", diff)
	}

	// Headers: on the first event of each base chain's run only; DNAT shows
	// from the first chain after the nat chain.
	vip := netip.MustParseAddrPort("10.96.0.10:80")
	ep := netip.MustParseAddrPort("10.200.0.2:8080")
	wantPkt := map[int]Packet{
		0: {Proto: nft.ProtoTCP, Src: src, Dst: vip, TCPFlags: SYN},
		3: {Proto: nft.ProtoTCP, Src: src, Dst: vip, TCPFlags: SYN},
		6: {Proto: nft.ProtoTCP, Src: src, Dst: ep, TCPFlags: SYN},
	}
	for i, e := range syn {
		w, ok := wantPkt[i]
		switch {
		case !ok && e.Packet != nil:
			t.Errorf("event %d carries a packet: %s", i, e)
		case ok && e.Packet == nil:
			t.Errorf("event %d carries no packet: %s", i, e)
		case ok && *e.Packet != w:
			t.Errorf("event %d packet %s, want %s", i, e.Packet, w)
		case ok && (e.IifName != "n0" || e.Oif != 0):
			t.Errorf("event %d interfaces: iif %d %q oif %d, want n0 and none", i, e.Iif, e.IifName, e.Oif)
		}
		if e.ID != syn[0].ID {
			t.Errorf("event %d id %08x, want the SYN's %08x throughout", i, e.ID, syn[0].ID)
		}
		if e.Family != NFProto(2) || e.NFProto != NFProto(2) {
			t.Errorf("event %d family %s nfproto %s, want ip", i, e.Family, e.NFProto)
		}
	}
	// Conntrack: absent before conntrack (raw priority), "new" after.
	for i, e := range syn {
		if i < 3 && e.CT != nil {
			t.Errorf("event %d before conntrack has ct %+v", i, *e.CT)
		}
	}
	if ct := syn[3].CT; ct == nil {
		t.Log("this kernel sends no conntrack attributes")
	} else if ct.State != 8 || !ct.HasEntry || ct.Direction != 0 || ct.ID == 0 {
		t.Errorf("SYN after conntrack: ct %+v, want state new, original direction, an id", *ct)
	}

	// Later packets of the connection: no nat chain; the input chain sees
	// the translated tuple. Each starts with the marking rule.
	for _, p := range pkts[1:] {
		if p[0].Table != armTable || p[0].Chain != ChainPrerouting || p[0].Packet == nil || p[0].Packet.Src != src {
			t.Errorf("later packet starts with %s, want the marking rule", p[0])
		}
		for _, e := range p {
			if e.Chain == "nat-prerouting" || e.Chain == "services" {
				t.Errorf("later packet runs the nat chains: %s", e)
			}
			if e.Chain == "filter-input" && e.Packet != nil && (e.Packet.Dst != ep || e.Packet.TCPFlags&ACK == 0) {
				t.Errorf("later packet at the input chain: %s, want an ACK to %s", e.Packet, ep)
			}
		}
	}
}

// TestTraceUDPOutput sends a datagram from the node itself to the Service:
// the output path (armed output chain, nat output DNAT to the node's own
// address), then the same skb back in over loopback, still marked, with a
// new trace id.
func TestTraceUDPOutput(t *testing.T) {
	l := newLab(t)
	lis := listen(t, l.node)
	arm(t, l.node, armTable, serviceMatches...)
	src := sendUDP(t, l.node, "10.96.0.10:53")
	buf := make([]byte, 64)
	_ = l.udp.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, from, err := l.udp.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "probe" || from.String() != src.String() {
		t.Fatalf("endpoint got %q from %v (%v), want the probe from %s", buf[:n], from, err, src)
	}
	evs := collect(t, lis)
	logEvents(t, evs)
	want := []step{
		{armTable, "output", "rule", "continue", 1, 0},
		{armTable, "output", "end", "continue", -1, 0},
		{armTable, "output", "policy", "accept", -1, 0},
		{"svc", "nat-output", "rule", "jump services", 0, 0},
		{"svc", "services", "rule", "jump svc-dns", 0, 0},
		{"svc", "svc-dns", "rule", "accept", 0, 0},
		// Back in over loopback: the armed prerouting rule does not match
		// the translated packet, but nftrace is still set.
		{armTable, "prerouting", "end", "continue", -1, 0},
		{armTable, "prerouting", "policy", "accept", -1, 0},
		{"svc", "filter-input", "rule", "jump checks", 0, 0},
		{"svc", "checks", "end", "continue", -1, 0},
		{"svc", "filter-input", "rule", "continue", 1, 0x4000},
		// The verdict map misses (udp . 5353 is not in it): no event.
		{"svc", "filter-input", "rule", "accept", 3, 0x4000},
	}
	if diff := cmp.Diff(want, steps(t, evs, readHandles(t, l))); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	vip := netip.MustParseAddrPort("10.96.0.10:53")
	ep := netip.MustParseAddrPort("10.200.0.2:5353")
	for i, w := range map[int]struct {
		pkt      Packet
		iif, oif string
	}{
		0: {Packet{Proto: nft.ProtoUDP, Src: src, Dst: vip}, "", "n0"},
		3: {Packet{Proto: nft.ProtoUDP, Src: src, Dst: vip}, "", "n0"},
		6: {Packet{Proto: nft.ProtoUDP, Src: src, Dst: ep}, "lo", ""},
		8: {Packet{Proto: nft.ProtoUDP, Src: src, Dst: ep}, "lo", ""},
	} {
		e := evs[i]
		if e.Packet == nil || *e.Packet != w.pkt || e.IifName != w.iif || e.OifName != w.oif {
			t.Errorf("event %d: %s; want packet %s iif %q oif %q", i, e, w.pkt, w.iif, w.oif)
		}
	}
	for i := range evs {
		same := i < 6 && evs[i].ID == evs[0].ID || i >= 6 && evs[i].ID == evs[6].ID
		if !same {
			t.Errorf("event %d id %08x: want one id on the way out, one on the way in", i, evs[i].ID)
		}
	}
	if evs[0].ID == evs[6].ID {
		t.Errorf("id %08x unchanged by the loopback re-entry", evs[0].ID)
	}
}

// TestUnmatchedPacketNoEvents sends packets the armed match does not select
// (udp to the Service, tcp straight to the endpoint): no event at all, though
// they run the same chains; then a matched one as a control.
func TestUnmatchedPacketNoEvents(t *testing.T) {
	l := newLab(t)
	lis := listen(t, l.node)
	arm(t, l.node, armTable, serviceMatches[0])
	sendUDP(t, l.cli, "10.96.0.10:53")
	connect(t, l.cli, "10.200.0.2:8080")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	evs, err := lis.Collect(ctx, 100*time.Millisecond, 0)
	if !errors.Is(err, context.DeadlineExceeded) || len(evs) != 0 {
		logEvents(t, evs)
		t.Fatalf("unmatched packets: %d events, err %v; want none and the deadline", len(evs), err)
	}
	connect(t, l.cli, "10.96.0.10:80")
	if evs := collect(t, lis); len(evs) == 0 {
		t.Fatal("control: a matched connection produced no events")
	}
}

// TestVethCrossingClearsNFTrace marks the client's packets on output and
// checks that the node, which runs its own chains on them, gets no event:
// veth's transmit scrubs nftrace.
func TestVethCrossingClearsNFTrace(t *testing.T) {
	l := newLab(t)
	cliLis, nodeLis := listen(t, l.cli), listen(t, l.node)
	arm(t, l.cli, armTable, serviceMatches[0])
	connect(t, l.cli, "10.96.0.10:80")
	cliEvs := collect(t, cliLis)
	if len(cliEvs) == 0 || cliEvs[0].Chain != ChainOutput || cliEvs[0].Packet == nil || cliEvs[0].OifName != "c0" {
		logEvents(t, cliEvs)
		t.Fatalf("client: want events from the armed output chain, first with the packet leaving c0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if evs, err := nodeLis.Collect(ctx, 100*time.Millisecond, 0); len(evs) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		logEvents(t, evs)
		t.Fatalf("node: %d events (err %v) for packets marked in the client; want none", len(evs), err)
	}
}

// TestCollectStopsAtMax checks that Collect stops at max events and leaves
// the rest queued for the next call.
func TestCollectStopsAtMax(t *testing.T) {
	l := newLab(t)
	lis := listen(t, l.node)
	arm(t, l.node, armTable, serviceMatches...)
	sendUDP(t, l.node, "10.96.0.10:53")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first, err := lis.Collect(ctx, time.Second, 2)
	if err != nil || len(first) != 2 {
		t.Fatalf("collect max 2: %d events, %v", len(first), err)
	}
	rest := collect(t, lis)
	if len(rest) != 10 || rest[0].Chain != ChainOutput || rest[0].Type != TypePolicy {
		logEvents(t, append(first, rest...))
		t.Fatalf("after max: %d events, want the other 10, from the output chain's policy on", len(rest))
	}
}

// TestCollectReportsOverrun shrinks the listener's buffer, lets the kernel
// overflow it, and expects ErrOverrun instead of a sequence with holes.
func TestCollectReportsOverrun(t *testing.T) {
	l := newLab(t)
	// The kernel's minimum receive buffer.
	lis, err := newListener(l.node, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	arm(t, l.node, armTable, serviceMatches...)
	for range 20 {
		sendUDP(t, l.node, "10.96.0.10:53")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	evs, err := lis.Collect(ctx, time.Second, 0)
	if !errors.Is(err, ErrOverrun) {
		t.Fatalf("collect after 240 events into a minimal buffer: %d events, err %v; want ErrOverrun", len(evs), err)
	}
}

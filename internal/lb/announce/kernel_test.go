package announce

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestAnswersOwnedIPs: a client on the link resolves owned IPs (ARP and NDP)
// to the node's MAC, and never resolves an IP the node does not own.
func TestAnswersOwnedIPs(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	r := l.start(t)
	if err := r.SetOwned([]netip.Addr{lb6, lb4}); err != nil {
		t.Fatal(err)
	}
	if got := r.Owned(); len(got) != 2 || got[0] != lb4 || got[1] != lb6 {
		t.Fatalf("Owned() = %v", got)
	}
	for _, ip := range []netip.Addr{lb4, lb6, lb4Other, lb6Other} {
		l.trigger(t, ip)
	}
	for _, ip := range []netip.Addr{lb4, lb6} {
		// A unicast, solicited answer makes the entry REACHABLE.
		n, took, ok := l.waitNeigh(t, ip, 3*time.Second, func(n netlink.Neigh) bool {
			return n.State == netlink.NUD_REACHABLE && hasMAC(n, l.aMAC)
		})
		if !ok {
			t.Errorf("%s: B's entry is %s %s, want REACHABLE %s", ip, n.HardwareAddr, neighState(n.State), l.aMAC)
			continue
		}
		t.Logf("%s resolved to %s in %v", ip, l.aMAC, took)
	}
	for _, ip := range []netip.Addr{lb4Other, lb6Other} {
		l.assertUnresolved(t, ip, 1500*time.Millisecond)
	}
}

// TestGratuitousOnOwnership: taking an IP over sends gratuitous ARP (request
// and reply) and unsolicited NAs, repeated, and moves a client's existing
// entry that points at the old owner to this node.
func TestGratuitousOnOwnership(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	r := l.start(t)
	oldOwner := mac{0x02, 0, 0, 0, 0, 0x01}
	for _, ip := range []netip.Addr{lb4, lb6} {
		l.setNeigh(t, ip, oldOwner, netlink.NUD_STALE)
		if n, ok := l.neigh(t, ip); !ok || !hasMAC(n, oldOwner) {
			t.Fatalf("%s: seeded entry is %v", ip, n)
		}
	}

	t0 := time.Now()
	frames := l.capture(t, t0.Add(1500*time.Millisecond))
	if err := r.SetOwned([]netip.Addr{lb4, lb6}); err != nil {
		t.Fatal(err)
	}
	t.Logf("SetOwned returned after %v", time.Since(t0))
	for _, ip := range []netip.Addr{lb4, lb6} {
		n, _, ok := l.waitNeigh(t, ip, 2*time.Second, func(n netlink.Neigh) bool { return hasMAC(n, l.aMAC) })
		if !ok {
			t.Errorf("%s: B's entry still %s %s, want %s", ip, n.HardwareAddr, neighState(n.State), l.aMAC)
			continue
		}
		t.Logf("%s: B's entry moved from the old owner to %s %v after SetOwned was called", ip, l.aMAC, time.Since(t0))
	}

	count := map[string][]time.Duration{}
	for _, f := range frames() {
		if f.From != l.aMAC {
			continue
		}
		if f.Announce != l.aMAC {
			t.Errorf("%s for %s announces %s, want %s", f.Kind, f.IP, f.Announce, l.aMAC)
		}
		if f.Kind == "garp-request" || f.Kind == "garp-reply" {
			if f.To != broadcastMAC {
				t.Errorf("%s for %s sent to %s, want broadcast", f.Kind, f.IP, f.To)
			}
		}
		if f.Kind == "unsolicited-na" && f.To != multicastMAC(allNodes) {
			t.Errorf("unsolicited NA for %s sent to %s, want all-nodes", f.IP, f.To)
		}
		key := f.Kind + " " + f.IP.String()
		count[key] = append(count[key], f.At.Sub(t0))
	}
	for _, key := range []string{"garp-request " + lb4.String(), "garp-reply " + lb4.String(), "unsolicited-na " + lb6.String()} {
		at := count[key]
		t.Logf("%s at %v", key, at)
		if len(at) != len(repeatOffsets) {
			t.Errorf("%s sent %d times, want %d", key, len(at), len(repeatOffsets))
			continue
		}
		if spread := at[len(at)-1] - at[0]; spread < 800*time.Millisecond {
			t.Errorf("%s repeats span %v, want about %v", key, spread, repeatOffsets[len(repeatOffsets)-1])
		}
	}
	if len(count) != 3 {
		t.Errorf("announcements seen: %v; want only the three kinds above", count)
	}
}

// TestReannounce: after another node claimed an owned IP (a neighbour's
// entry names it), Reannounce sends the gratuitous announcements again,
// repeated as for a new claim, and the entry names this node again; with
// nothing owned it sends nothing.
func TestReannounce(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	r := l.start(t)
	r.Reannounce() // nothing owned yet
	if err := r.SetOwned([]netip.Addr{lb4, lb6}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // the claim's repeats are over
	// Another node took the IPs meanwhile: B's entries name it (gratuitous
	// ARP and unsolicited NAs update an entry; they do not make one).
	taker := mac{0x02, 0, 0, 0, 0, 0x03}
	for _, ip := range []netip.Addr{lb4, lb6} {
		l.setNeigh(t, ip, taker, netlink.NUD_STALE)
	}
	t0 := time.Now()
	frames := l.capture(t, t0.Add(1500*time.Millisecond))
	r.Reannounce()
	for _, ip := range []netip.Addr{lb4, lb6} {
		if n, _, ok := l.waitNeigh(t, ip, 2*time.Second, func(n netlink.Neigh) bool { return hasMAC(n, l.aMAC) }); !ok {
			t.Errorf("%s: B's entry still %s after Reannounce, want %s", ip, n.HardwareAddr, l.aMAC)
		}
	}
	count := map[string]int{}
	for _, f := range frames() {
		if f.From == l.aMAC {
			count[f.Kind+" "+f.IP.String()]++
		}
	}
	for _, key := range []string{"garp-request " + lb4.String(), "garp-reply " + lb4.String(), "unsolicited-na " + lb6.String()} {
		if count[key] != len(repeatOffsets) {
			t.Errorf("%s sent %d times after Reannounce, want %d (all seen: %v)", key, count[key], len(repeatOffsets), count)
		}
	}
}

// TestStopsAnsweringRemovedIPs: an IP that SetOwned drops is no longer
// answered, its solicited-node group is left, and the new set is answered.
func TestStopsAnsweringRemovedIPs(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	r := l.start(t)
	if err := r.SetOwned([]netip.Addr{lb4, lb6}); err != nil {
		t.Fatal(err)
	}
	if !l.igmp6Has(t, lb6) {
		t.Errorf("a0 did not join the solicited-node group of %s", lb6)
	}
	for _, ip := range []netip.Addr{lb4, lb6} {
		l.trigger(t, ip)
		if n, _, ok := l.waitNeigh(t, ip, 3*time.Second, func(n netlink.Neigh) bool { return hasMAC(n, l.aMAC) }); !ok {
			t.Fatalf("%s not resolved while owned: %s %s", ip, n.HardwareAddr, neighState(n.State))
		}
	}

	if err := r.SetOwned([]netip.Addr{lb4Other}); err != nil {
		t.Fatal(err)
	}
	if got := r.Owned(); len(got) != 1 || got[0] != lb4Other {
		t.Fatalf("Owned() = %v, want [%s]", got, lb4Other)
	}
	if l.igmp6Has(t, lb6) {
		t.Errorf("a0 still in the solicited-node group of %s after it was dropped", lb6)
	}
	for _, ip := range []netip.Addr{lb4, lb6} {
		l.delNeigh(t, ip)
		l.trigger(t, ip)
	}
	l.trigger(t, lb4Other)
	for _, ip := range []netip.Addr{lb4, lb6} {
		l.assertUnresolved(t, ip, 1500*time.Millisecond)
	}
	if n, ok := l.neigh(t, lb4Other); !ok || !hasMAC(n, l.aMAC) {
		t.Errorf("newly owned %s not resolved: %s %s", lb4Other, n.HardwareAddr, neighState(n.State))
	}
}

// TestAnswersUnicastProbes: neighbour unreachability detection probes a
// cached entry with unicast requests addressed to the IP itself; they are
// answered too (an ICMPv6 socket would never see the IPv6 ones).
func TestAnswersUnicastProbes(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	// Probe as soon as a stale entry is used.
	sh(t, l.b, "sysctl", "-qw", "net.ipv4.neigh.b0.delay_first_probe_time=0", "net.ipv6.neigh.b0.delay_first_probe_time=0")
	r := l.start(t)
	if err := r.SetOwned([]netip.Addr{lb4, lb6}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	frames := l.capture(t, start.Add(1500*time.Millisecond))
	for _, ip := range []netip.Addr{lb4, lb6} {
		l.setNeigh(t, ip, l.aMAC, netlink.NUD_STALE)
		l.trigger(t, ip)
	}
	for _, ip := range []netip.Addr{lb4, lb6} {
		// Only a solicited answer to the probe makes the entry REACHABLE
		// (gratuitous ones leave it STALE).
		n, took, ok := l.waitNeigh(t, ip, 3*time.Second, func(n netlink.Neigh) bool {
			return n.State == netlink.NUD_REACHABLE && hasMAC(n, l.aMAC)
		})
		if !ok {
			t.Errorf("%s: entry %s %s after probing, want REACHABLE", ip, n.HardwareAddr, neighState(n.State))
			continue
		}
		t.Logf("%s confirmed by a unicast probe in %v", ip, took)
	}
	// The probes B sent were unicast to the node's MAC.
	unicast := map[netip.Addr]int{}
	for _, f := range frames() {
		if f.From != l.bMAC || (f.Kind != "arp-request" && f.Kind != "ns") {
			continue
		}
		if f.To != l.aMAC {
			t.Errorf("B sent a non-unicast %s for %s to %s", f.Kind, f.IP, f.To)
			continue
		}
		unicast[f.IP]++
	}
	if unicast[lb4] == 0 || unicast[lb6] == 0 {
		t.Errorf("unicast probes seen: %v; want some for %s and %s", unicast, lb4, lb6)
	}
}

// TestLinkDownUpAndDelete: after the interface goes down and up, or changes
// MAC, owned IPs are announced again; when it is deleted, Run ends with
// ErrInterfaceGone.
func TestLinkDownUpAndDelete(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	r := l.start(t)
	if err := r.SetOwned([]netip.Addr{lb4}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // let the first announcements finish

	sh(t, l.a, "ip", "link", "set", "a0", "down")
	time.Sleep(300 * time.Millisecond)
	up := time.Now()
	frames := l.capture(t, up.Add(2500*time.Millisecond)) // carrier comes back through linkwatch, up to 1s late
	sh(t, l.a, "ip", "link", "set", "a0", "up")
	var after []time.Duration
	for _, f := range frames() {
		if f.Kind == "garp-request" && f.IP == lb4 && f.Announce == l.aMAC {
			after = append(after, f.At.Sub(up))
		}
	}
	t.Logf("announcements of %s after link up: %v", lb4, after)
	if len(after) != len(repeatOffsets) {
		t.Errorf("%d announcements after link up, want %d", len(after), len(repeatOffsets))
	}

	newMAC := mac{0x02, 0, 0, 0, 0x01, 0x77}
	frames = l.capture(t, time.Now().Add(500*time.Millisecond))
	sh(t, l.a, "ip", "link", "set", "a0", "address", newMAC.String())
	var announced bool
	for _, f := range frames() {
		announced = announced || (f.Kind == "garp-request" && f.IP == lb4 && f.Announce == newMAC)
	}
	if !announced {
		t.Errorf("no announcement of %s with the new MAC %s", lb4, newMAC)
	}
	l.delNeigh(t, lb4)
	l.trigger(t, lb4)
	if n, _, ok := l.waitNeigh(t, lb4, 3*time.Second, func(n netlink.Neigh) bool { return hasMAC(n, newMAC) }); !ok {
		t.Errorf("after the MAC change %s resolves to %s %s, want %s", lb4, n.HardwareAddr, neighState(n.State), newMAC)
	}
	if err, done := r.wait(0); done {
		t.Fatalf("Run returned early: %v", err)
	}

	r.wantErr = ErrInterfaceGone
	sh(t, l.a, "ip", "link", "del", "a0")
	err, done := r.wait(3 * time.Second)
	if !done || !errors.Is(err, ErrInterfaceGone) {
		t.Fatalf("after deleting a0 Run returned %v (done %v), want ErrInterfaceGone", err, done)
	}
	t.Logf("Run: %v", err)
}

// TestLifecycle: New's failures, Close, and running twice.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	for _, name := range []string{"nonexistent0", "lo", ""} {
		if err := l.a.Do(func() error { _, err := New(Config{Interface: name}); return err }); err == nil {
			t.Errorf("New(%q) succeeded", name)
		} else {
			t.Logf("New(%q): %v", name, err)
		}
	}
	var a *L2
	if err := l.a.Do(func() (err error) { a, err = New(Config{Interface: "a0"}); return err }); err != nil {
		t.Fatal(err)
	}
	if err := a.SetOwned([]netip.Addr{lb4}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got := a.Owned(); len(got) != 0 {
		t.Errorf("Owned() after Close = %v", got)
	}
	if err := a.SetOwned([]netip.Addr{lb4}); !errors.Is(err, ErrClosed) {
		t.Errorf("SetOwned after Close: %v, want ErrClosed", err)
	}
	if err := a.Run(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}

	// Running twice: whichever Run starts second fails at once.
	var b *L2
	if err := l.a.Do(func() (err error) { b, err = New(Config{Interface: "a0"}); return err }); err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(t.Context())
	defer cancel1()
	first := make(chan error, 1)
	go func() { first <- b.Run(ctx1) }()
	ctx2, cancel2 := context.WithTimeout(t.Context(), time.Second)
	defer cancel2()
	err2 := b.Run(ctx2)
	cancel1()
	var err1 error
	select {
	case err1 = <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of cancel")
	}
	if (err1 == nil) == (err2 == nil) {
		t.Errorf("concurrent Runs returned %v and %v; want exactly one error", err1, err2)
	} else {
		t.Logf("second Run: %v", errors.Join(err1, err2))
	}
}

// TestDefendsOwnedIPv6AgainstDAD: a host that tries to configure an owned
// IPv6 address gets an answer to its duplicate-address probe and gives the
// address up.
func TestDefendsOwnedIPv6AgainstDAD(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	r := l.start(t)
	if err := r.SetOwned([]netip.Addr{lb6}); err != nil {
		t.Fatal(err)
	}
	// Past the gratuitous repeats (a tentative address also fails on an
	// unsolicited NA), only the answer to B's probe can fail it.
	time.Sleep(repeatOffsets[len(repeatOffsets)-1] + 200*time.Millisecond)
	sh(t, l.b, "sysctl", "-qw", "net.ipv6.conf.b0.accept_dad=1")
	sh(t, l.b, "ip", "-6", "addr", "add", lb6.String()+"/64", "dev", "b0")
	deadline := time.Now().Add(3 * time.Second) // one probe, retransmit timer 1s
	for {
		out, err := l.b.Command("ip", "-6", "addr", "show", "dev", "b0", "to", lb6.String()+"/128").CombinedOutput()
		if err != nil {
			t.Fatalf("ip addr show: %v: %s", err, out)
		}
		if strings.Contains(string(out), "dadfailed") {
			t.Logf("B gave %s up: %s", lb6, strings.Join(strings.Fields(string(out)), " "))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("B kept %s after its duplicate-address probe: %s", lb6, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

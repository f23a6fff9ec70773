package announce

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/packet"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// downBackoff paces a reader after the kernel reported the interface down, so
// a flapping link cannot spin it.
const downBackoff = 100 * time.Millisecond

// Run answers ARP requests and neighbour solicitations for the owned IPs,
// sends the repeats of gratuitous announcements, and follows the interface's
// link state, until ctx is done (it then returns nil) or a socket fails
// (ErrInterfaceGone when the interface was deleted; see L2 for link down/up).
// It closes the sockets on return, so an L2 runs once; a second call returns
// an error. Run may be called from any goroutine.
func (a *L2) Run(ctx context.Context) error {
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		return fmt.Errorf("announce on %s: %w", a.ifname, ErrClosed)
	case a.ran:
		a.mu.Unlock()
		return fmt.Errorf("announce on %s: already running", a.ifname)
	}
	a.ran = true
	self := a.mac
	a.mu.Unlock()
	a.log.Info("answering ARP and NDP", "interface", a.ifname, "mac", self.String())

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// Reads on packet sockets only end when the socket is closed.
		<-gctx.Done()
		if err := a.Close(); err != nil {
			a.log.Error(err, "close announcer")
		}
		return nil
	})
	g.Go(func() error { return a.serve(gctx, "arp", a.arp, a.handleARP) })
	g.Go(func() error { return a.serve(gctx, "ndp", a.ndp, a.handleNS) })
	g.Go(func() error { return a.watchLink(gctx) })
	g.Go(func() error { return a.repeat(gctx) })
	err := g.Wait()
	a.log.Info("stopped answering ARP and NDP", "interface", a.ifname)
	return err
}

// serve reads frames from c and hands them to handle until ctx is done.
func (a *L2) serve(ctx context.Context, proto string, c *packet.Conn, handle func([]byte)) error {
	buf := make([]byte, snapLen)
	for {
		n, _, err := c.ReadFrom(buf)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, unix.ENETDOWN) {
			// The kernel reports this once per down; the socket is
			// reattached when the interface comes back up.
			a.log.V(1).Info("socket reports interface down", "interface", a.ifname, "proto", proto)
			if !sleep(ctx, downBackoff) {
				return nil
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s on %s: %w", proto, a.ifname, err)
		}
		handle(buf[:n])
	}
}

func (a *L2) handleARP(frame []byte) {
	self := a.currentMAC()
	req, reply, v := answerARP(frame, self, a.isOwned)
	switch v {
	case answered:
		if err := a.write(a.arp, reply.encode(), reply.Eth.Dst); err != nil {
			a.log.Error(err, "answer ARP request", "interface", a.ifname, "ip", req.TPA, "asker", req.SPA)
			return
		}
		a.log.V(2).Info("answered ARP request", "interface", a.ifname, "ip", req.TPA,
			"asker", req.SPA, "askerMAC", req.SHA.String(), "mac", self.String())
	case announcement:
		a.log.Info("another host announces an owned IP", "interface", a.ifname, "ip", req.TPA, "mac", req.SHA.String())
	default:
		a.log.V(5).Info("ignored ARP frame", "interface", a.ifname, "reason", v.String())
	}
}

func (a *L2) handleNS(frame []byte) {
	self := a.currentMAC()
	ns, na, v := answerNS(frame, self, a.isOwned)
	switch v {
	case answered:
		if err := a.write(a.ndp, na.encode(), na.Eth.Dst); err != nil {
			a.log.Error(err, "answer neighbour solicitation", "interface", a.ifname, "ip", ns.Target, "asker", ns.Src)
			return
		}
		a.log.V(2).Info("answered neighbour solicitation", "interface", a.ifname, "ip", ns.Target,
			"asker", ns.Src, "askerMAC", ns.Eth.Src.String(), "dad", ns.isDAD(), "mac", self.String())
	default:
		a.log.V(5).Info("ignored IPv6 frame", "interface", a.ifname, "reason", v.String())
	}
}

// repeat sends scheduled gratuitous announcements when they are due.
func (a *L2) repeat(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		a.mu.Lock()
		for _, p := range a.sched.popDue(time.Now()) {
			a.announceLocked(p.IP, p.Attempt) // removal cancels the schedule: all are owned
		}
		next, ok := a.sched.next()
		a.mu.Unlock()
		var due <-chan time.Time
		if ok {
			timer.Reset(time.Until(next))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.wake:
		case <-due:
		}
	}
}

// watchLink follows the interface's link events (see L2 for what it does on
// each) until ctx is done or the interface is gone.
func (a *L2) watchLink(ctx context.Context) error {
	buf := make([]byte, 1<<16)
	for {
		n, _, err := a.link.Recvfrom(ctx, buf, 0)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, unix.ENOBUFS) {
			// Events were dropped: ask for the current state instead.
			a.log.V(1).Info("link events overran; querying link state", "interface", a.ifname)
			if err := a.requestLink(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read link events for %s: %w", a.ifname, err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("parse link events for %s: %w", a.ifname, err)
		}
		for _, m := range msgs {
			if ev, ok := parseLinkMessage(m, a.ifindex); ok {
				if err := a.onLink(ev); err != nil {
					return err
				}
			}
		}
	}
}

func (a *L2) requestLink(ctx context.Context) error {
	a.mu.Lock()
	a.seq++
	seq := a.seq
	a.mu.Unlock()
	if err := a.link.Sendto(ctx, getLinkRequest(a.ifindex, seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("query link state of %s: %w", a.ifname, err)
	}
	return nil
}

// onLink applies one link event: a deleted interface ends Run; an interface
// that comes (back) up, or whose MAC changed while up, gets every owned IP
// announced afresh.
func (a *L2) onLink(ev linkEvent) error {
	if ev.Gone {
		return fmt.Errorf("announce on %s (index %d): %w", a.ifname, a.ifindex, ErrInterfaceGone)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	wasUp, oldMAC := a.up, a.mac
	a.up = ev.Up
	if ev.HasMAC {
		a.mac = ev.MAC
	}
	switch {
	case wasUp && !ev.Up:
		a.log.Info("interface down; answering resumes when it is up", "interface", a.ifname)
		return nil
	case !ev.Up:
		return nil
	case !wasUp:
		a.log.Info("interface up; announcing owned IPs again", "interface", a.ifname, "ips", len(a.owned))
	case a.mac != oldMAC:
		a.log.Info("interface MAC changed; announcing owned IPs again", "interface", a.ifname, "mac", a.mac.String(), "ips", len(a.owned))
	default:
		return nil
	}
	a.announceOwnedLocked()
	return nil
}

// Reannounce implements Announcer: every owned IP is announced as a newly
// owned one is (0, 200 ms and 1 s from now).
func (a *L2) Reannounce() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.announceOwnedLocked()
}

// announceOwnedLocked schedules the announcements of every owned IP from now
// and wakes the sender. a.mu must be held.
func (a *L2) announceOwnedLocked() {
	now := time.Now()
	for ip := range a.owned {
		a.sched.add(ip, now, repeatOffsets, 0)
	}
	a.poke()
}

// sleep waits d or until ctx is done; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

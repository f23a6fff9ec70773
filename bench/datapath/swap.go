package datapathbench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/netns"
)

// settleLimit bounds each wait after a swap: every path answering, the probe,
// the LoadBalancer IP back on its owner.
const settleLimit = time.Minute

// newPathResults returns one empty result per target, in order.
func newPathResults(targets []target) []pathResult {
	res := make([]pathResult, len(targets))
	for i, t := range targets {
		res[i].path = t.path
	}
	return res
}

// waitTargets waits until both ends of every target answer, each bounded by
// limit.
func waitTargets(ctx context.Context, targets []target, limit time.Duration) error {
	for _, tg := range targets {
		for _, p := range []struct {
			ns   *netns.NS
			addr string
		}{{tg.directNS, tg.directAddr}, {tg.serviceNS, tg.svcAddr}} {
			if err := waitAnswer(ctx, p.ns, p.addr, limit); err != nil {
				return fmt.Errorf("%s: %w", tg.path, err)
			}
		}
	}
	return nil
}

// lbOwner returns the node the external client (extNS) reaches ip through,
// after one request to it.
func lbOwner(ctx context.Context, l *lab.Lab, extNS *netns.NS, ip netip.Addr) (int, error) {
	if err := get(ctx, extNS, hostPort(ip, 80)); err != nil {
		return 0, fmt.Errorf("loadbalancer %s: %w", ip, err)
	}
	return l.Announcer(ip)
}

// swapTo makes proxy the nodes' Service proxy, with its data plane
// (lab.SetProxyPlane), and waits,
// bounded by settleLimit, until it serves as the old one did: every path
// answers, the last probe answers on both nodes (everything applied is
// programmed), and the LoadBalancer IP is announced by its owner again (the
// speakers restart with the proxy, and one that is ready first may take every
// IP for a moment, which would change the loadbalancer path's hops). It
// returns the time from the start of the swap until then (ready), and the
// time it then waited until the agents were quiet (waitQuiet).
func swapTo(ctx context.Context, l *lab.Lab, bp benchProxy, sc *scaler, targets []target, lbIP netip.Addr, extNS *netns.NS, owner int) (ready, quiet time.Duration, err error) {
	proxy := bp.name
	t0 := time.Now()
	if err := l.SetProxyPlane(ctx, bp.labProxy, bp.dataPlane); err != nil {
		return 0, 0, fmt.Errorf("swap to %s: %w", proxy, err)
	}
	if err := waitTargets(ctx, targets, settleLimit); err != nil {
		return 0, 0, fmt.Errorf("swap to %s: %w", proxy, err)
	}
	if err := sc.probeAnswers(ctx, settleLimit); err != nil {
		return 0, 0, fmt.Errorf("swap to %s: %w", proxy, err)
	}
	deadline := time.Now().Add(settleLimit)
	for {
		got, err := lbOwner(ctx, l, extNS, lbIP)
		if err == nil && got == owner {
			break
		}
		if err == nil {
			err = fmt.Errorf("announced by node%d, not node%d", got, owner)
			// A gratuitous ARP of the node that held the IP for a moment can
			// land after the owner's; the traffic then keeps the client's entry
			// fresh, so it would stay. Forget it: the next request asks again,
			// and only the owner answers.
			if ferr := forgetNeighbour(extNS, lbIP); ferr != nil {
				return 0, 0, fmt.Errorf("swap to %s: %w", proxy, ferr)
			}
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("swap to %s: loadbalancer %s after %s: %w", proxy, lbIP, settleLimit, err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, 0, err
		}
	}
	ready = time.Since(t0)
	quiet, err = waitQuiet(ctx, l.AgentPids)
	return ready, quiet, err
}

// forgetNeighbour deletes the neighbour entry for ip on eth0 of ns (the lab's
// external client).
func forgetNeighbour(ns *netns.NS, ip netip.Addr) error {
	err := ns.Do(func() error {
		link, err := netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("eth0: %w", err)
		}
		n := &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4, IP: ip.AsSlice()}
		if err := netlink.NeighDel(n); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget neighbour %s in %s: %w", ip, ns.Name(), err)
	}
	return nil
}

package link

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Loopback is the loopback interface of a network namespace.
type Loopback struct {
	Info  Info
	Addrs []netip.Prefix // every address of lo, IPv4 first as the kernel lists them
}

// SetLoopback sets lo in the network namespace at netnsPath up (or down) and
// returns it as it is then. The namespace is checked as openNS does, so a
// path that is not a network namespace is refused (the error wraps ErrNetNS)
// and never opened as anything else.
func SetLoopback(netnsPath string, up bool) (Loopback, error) {
	return loopback(netnsPath, func(h *netlink.Handle, l netlink.Link) error {
		set := h.LinkSetDown
		if up {
			set = h.LinkSetUp
		}
		if err := set(l); err != nil {
			return fmt.Errorf("lo in %s: set up=%v: %w", netnsPath, up, err)
		}
		return nil
	})
}

// InspectLoopback returns lo of the network namespace at netnsPath.
func InspectLoopback(netnsPath string) (Loopback, error) {
	return loopback(netnsPath, nil)
}

func loopback(netnsPath string, change func(*netlink.Handle, netlink.Link) error) (Loopback, error) {
	ns, err := openNS(netnsPath)
	if err != nil {
		return Loopback{}, err
	}
	defer ns.Close()
	var lo Loopback
	err = inPod(ns, func(h *netlink.Handle) error {
		l, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("lo in %s: %w", netnsPath, err)
		}
		if change != nil {
			if err := change(h, l); err != nil {
				return err
			}
			if l, err = h.LinkByName("lo"); err != nil {
				return fmt.Errorf("lo in %s: %w", netnsPath, err)
			}
		}
		lo.Info = infoOf(l)
		lo.Addrs, err = addrsOf(h, l)
		return err
	})
	return lo, err
}

package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"
)

// interfaceAddrs lists the addresses of this network namespace's interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// setVerbosity sets klog's -v.
func setVerbosity(v int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(v))
}

package zone

import (
	"net/netip"
	"strings"
)

// podIP parses the first label of <dashed-ip>.<ns>.pod.<zone> as CoreDNS does: a
// label with exactly three "-" and no "--" is an IPv4 address with "." written
// "-", any other an IPv6 address with ":" written "-" (so "--" is "::"). An
// IPv4-mapped IPv6 address is its IPv4 address. ok is false when the label is no
// address.
func podIP(label string) (ip netip.Addr, ok bool) {
	var s string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	} else {
		s = strings.ReplaceAll(label, "-", ":")
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

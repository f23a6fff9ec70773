package controlplane

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Defaults of kube-apiserver as svcnet runs it (see docs/design.md, IP plan).
var (
	DefaultServiceCIDR   = netip.MustParsePrefix("10.96.0.0/12")
	DefaultNodePortRange = PortRange{First: 30000, Last: 32767}
)

// DefaultConfig returns --service-cluster-ip-range=10.96.0.0/12 and
// --service-node-port-range=30000-32767.
func DefaultConfig() Config {
	return Config{
		ServiceCIDRs:  []netip.Prefix{DefaultServiceCIDR},
		NodePortRange: DefaultNodePortRange,
	}
}

// WithDefaults returns c with every empty field set to its default and every CIDR
// masked to its network address. It never fails; Validate reports what is unusable.
func (c Config) WithDefaults() Config {
	out := Config{NodePortRange: c.NodePortRange}
	for _, p := range c.ServiceCIDRs {
		out.ServiceCIDRs = append(out.ServiceCIDRs, p.Masked())
	}
	if len(out.ServiceCIDRs) == 0 {
		out.ServiceCIDRs = []netip.Prefix{DefaultServiceCIDR}
	}
	if out.NodePortRange == (PortRange{}) {
		out.NodePortRange = DefaultNodePortRange
	}
	return out
}

// Validate reports a Config the apiserver would refuse to start with: not one CIDR
// or a dual-stack pair, an IPv6 CIDR shorter than /64 (the MultiCIDR allocator's
// limit), a CIDR too small to hold an address, or a bad port range.
func (c Config) Validate() error {
	switch len(c.ServiceCIDRs) {
	case 1:
	case 2:
		if c.ServiceCIDRs[0].Addr().Is4() == c.ServiceCIDRs[1].Addr().Is4() {
			return fmt.Errorf("%w: service CIDRs %s and %s must be of different IP families", ErrInvalidConfig, c.ServiceCIDRs[0], c.ServiceCIDRs[1])
		}
	default:
		return fmt.Errorf("%w: want one service CIDR or a dual-stack pair, got %d", ErrInvalidConfig, len(c.ServiceCIDRs))
	}
	for _, p := range c.ServiceCIDRs {
		if err := validateServiceCIDR(p); err != nil {
			return fmt.Errorf("%w: service CIDR %s: %v", ErrInvalidConfig, p, err)
		}
	}
	r := c.NodePortRange
	if r.First < 1 || r.Last > 65535 || r.First > r.Last {
		return fmt.Errorf("%w: node port range %s: want 1 <= first <= last <= 65535", ErrInvalidConfig, r)
	}
	return nil
}

func validateServiceCIDR(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("not a valid CIDR")
	case p.Addr().Is4In6():
		return fmt.Errorf("must not be an IPv4-mapped IPv6 CIDR")
	case p.Addr().Is6() && p.Bits() < 64:
		return fmt.Errorf("shortest allowed prefix length for service CIDR is 64, got %d", p.Bits())
	case p.Addr().Is4() && p.Bits() > 30, p.Addr().Is6() && p.Bits() > 127:
		return fmt.Errorf("too small: no address to allocate")
	}
	return nil
}

// ParsePortRange parses a --service-node-port-range value as the apiserver does:
// "30000-32767", "30000+2767" (base and size beyond it), or a single port "30000".
func ParsePortRange(s string) (PortRange, error) {
	s = strings.TrimSpace(s)
	bad := func(err error) (PortRange, error) {
		return PortRange{}, fmt.Errorf("unable to parse port range %q: %w", s, err)
	}
	var r PortRange
	var err error
	switch {
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		if r.First, err = parsePort(a); err != nil {
			return bad(err)
		}
		if r.Last, err = parsePort(b); err != nil {
			return bad(err)
		}
	case strings.Contains(s, "+"):
		a, b, _ := strings.Cut(s, "+")
		if r.First, err = parsePort(a); err != nil {
			return bad(err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(b), 10, 16)
		if err != nil {
			return bad(err)
		}
		r.Last = r.First + int32(n)
	default:
		if r.First, err = parsePort(s); err != nil {
			return bad(err)
		}
		r.Last = r.First
	}
	if r.Last > 65535 || r.First > r.Last {
		return bad(fmt.Errorf("want first <= last <= 65535"))
	}
	return r, nil
}

func parsePort(s string) (int32, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("port 0 is not allowed")
	}
	return int32(n), nil
}

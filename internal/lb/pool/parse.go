package pool

import (
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/svcnet/svcnet/internal/lb/alloc"
)

// Parse validates p and converts it to an alloc.Pool. It reports every problem at
// once in an *Error (wrapping ErrInvalid) naming the pool and each field: a missing
// name; an unknown mode; addresses in node-ip mode, or none in l2 mode; an address
// that is not a CIDR (network address, no IPv4-mapped IPv6) or a range first-last
// of one family with first <= last; two addresses of the pool that overlap; a
// negative priority; a namespace that is not a DNS label; an invalid selector.
// Overlaps between pools are Overlaps' concern. p is not modified.
func Parse(p *IPAddressPool) (alloc.Pool, error) {
	var probs problems
	out := alloc.Pool{Name: p.Name, AutoAssign: true, Mode: alloc.ModeL2}
	if p.Name == "" {
		probs.add("metadata.name", "required")
	}
	if p.Spec.AutoAssign != nil {
		out.AutoAssign = *p.Spec.AutoAssign
	}
	switch p.Spec.Mode {
	case "", string(alloc.ModeL2):
		if len(p.Spec.Addresses) == 0 {
			probs.add("spec.addresses", "required in l2 mode")
		}
	case string(alloc.ModeNodeIP):
		out.Mode = alloc.ModeNodeIP
		if len(p.Spec.Addresses) > 0 {
			probs.add("spec.addresses", "must be empty in node-ip mode")
		}
	default:
		probs.addf("spec.mode", "%q: unknown mode (want %s or %s)", p.Spec.Mode, alloc.ModeL2, alloc.ModeNodeIP)
	}
	out.Ranges = parseAddresses(p.Spec.Addresses, &probs)
	if sa := p.Spec.ServiceAllocation; sa != nil {
		parseAllocation(sa, &out, &probs)
	}
	if len(probs) > 0 {
		return alloc.Pool{}, &Error{Pool: p.Name, Problems: probs}
	}
	return out, nil
}

// problems collects "field: reason" texts.
type problems []string

func (p *problems) add(field, reason string) { *p = append(*p, field+": "+reason) }

func (p *problems) addf(field, format string, args ...any) {
	p.add(field, fmt.Sprintf(format, args...))
}

// parseAddresses parses every entry, reporting bad ones and overlaps between them.
func parseAddresses(addrs []string, probs *problems) []alloc.Range {
	var out []alloc.Range
	var from []int // index in addrs of each out entry
	for i, s := range addrs {
		fld := fmt.Sprintf("spec.addresses[%d]", i)
		r, err := ParseRange(s)
		if err != nil {
			probs.addf(fld, "%q: %v", s, err)
			continue
		}
		for j, o := range out {
			if o.Overlaps(r) {
				probs.addf(fld, "%q: overlaps spec.addresses[%d] %q", s, from[j], addrs[from[j]])
				break
			}
		}
		out = append(out, r)
		from = append(from, i)
	}
	return out
}

// ParseRange parses one spec.addresses entry: a CIDR whose address is its network
// address ("172.26.236.180/30": .180 to .183) or an inclusive range of one family
// ("172.26.236.180-172.26.236.199", spaces around the dash allowed).
func ParseRange(s string) (alloc.Range, error) {
	s = strings.TrimSpace(s)
	if first, last, ok := strings.Cut(s, "-"); ok {
		a, err := parseAddr(strings.TrimSpace(first))
		if err != nil {
			return alloc.Range{}, err
		}
		b, err := parseAddr(strings.TrimSpace(last))
		if err != nil {
			return alloc.Range{}, err
		}
		if a.Is4() != b.Is4() {
			return alloc.Range{}, fmt.Errorf("first and last address of different families")
		}
		if a.Compare(b) > 0 {
			return alloc.Range{}, fmt.Errorf("first address after last")
		}
		return alloc.Range{First: a, Last: b}, nil
	}
	if !strings.Contains(s, "/") {
		return alloc.Range{}, fmt.Errorf("want a CIDR (172.26.236.180/30) or a range (172.26.236.180-172.26.236.199)")
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return alloc.Range{}, fmt.Errorf("bad CIDR: %w", err)
	}
	if p.Addr().Is4In6() {
		return alloc.Range{}, fmt.Errorf("IPv4-mapped IPv6 addresses are not supported")
	}
	if m := p.Masked(); m != p {
		return alloc.Range{}, fmt.Errorf("not a network address (want %s)", m)
	}
	return alloc.PrefixRange(p), nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bad address: %w", err)
	}
	if a.Zone() != "" || a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("address %s: zones and IPv4-mapped IPv6 addresses are not supported", s)
	}
	return a, nil
}

// parseAllocation fills the pool's priority and limits from sa.
func parseAllocation(sa *ServiceAllocation, out *alloc.Pool, probs *problems) {
	if sa.Priority < 0 {
		probs.addf("spec.serviceAllocation.priority", "%d: must not be negative", sa.Priority)
	}
	out.Priority = sa.Priority
	for i, ns := range sa.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			probs.addf(fmt.Sprintf("spec.serviceAllocation.namespaces[%d]", i), "%q: not a namespace name: %s", ns, strings.Join(errs, ", "))
		}
	}
	out.Namespaces = append([]string(nil), sa.Namespaces...)
	out.NamespaceSelectors = parseSelectors("spec.serviceAllocation.namespaceSelectors", sa.NamespaceSelectors, probs)
	out.ServiceSelectors = parseSelectors("spec.serviceAllocation.serviceSelectors", sa.ServiceSelectors, probs)
}

func parseSelectors(fld string, in []metav1.LabelSelector, probs *problems) []labels.Selector {
	var out []labels.Selector
	for i := range in {
		sel, err := metav1.LabelSelectorAsSelector(&in[i])
		if err != nil {
			probs.addf(fmt.Sprintf("%s[%d]", fld, i), "%v", err)
			continue
		}
		out = append(out, sel)
	}
	return out
}

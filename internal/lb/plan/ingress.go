package plan

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// vipIngress returns one ingress entry per IP, in the given order, with IPMode VIP.
func vipIngress(ips []netip.Addr) []corev1.LoadBalancerIngress {
	if len(ips) == 0 {
		return nil
	}
	out := make([]corev1.LoadBalancerIngress, len(ips))
	for i, ip := range ips {
		vip := corev1.LoadBalancerIPModeVIP
		out[i] = corev1.LoadBalancerIngress{IP: ip.String(), IPMode: &vip}
	}
	return out
}

// EqualIngress reports whether two status.loadBalancer.ingress lists say the
// same: the same entries in any order, nil and empty alike, an unset ipMode equal
// to VIP for an entry with an IP (the apiserver's default), and the same ports in
// any order.
func EqualIngress(a, b []corev1.LoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	na, nb := normalIngress(a), normalIngress(b)
	return slices.EqualFunc(na, nb, func(x, y ingressKey) bool {
		return compareIngress(x, y) == 0
	})
}

type ingressKey struct {
	ip, hostname, mode string
	ports              []corev1.PortStatus
}

func normalIngress(in []corev1.LoadBalancerIngress) []ingressKey {
	out := make([]ingressKey, len(in))
	for i, ing := range in {
		k := ingressKey{ip: ing.IP, hostname: ing.Hostname}
		if ip, err := netip.ParseAddr(ing.IP); err == nil {
			k.ip = ip.String() // one spelling per address
		}
		switch {
		case ing.IPMode != nil:
			k.mode = string(*ing.IPMode)
		case ing.IP != "":
			k.mode = string(corev1.LoadBalancerIPModeVIP)
		}
		k.ports = slices.Clone(ing.Ports)
		slices.SortFunc(k.ports, comparePort)
		out[i] = k
	}
	slices.SortFunc(out, compareIngress)
	return out
}

func compareIngress(x, y ingressKey) int {
	return cmp.Or(cmp.Compare(x.ip, y.ip), cmp.Compare(x.hostname, y.hostname), cmp.Compare(x.mode, y.mode),
		slices.CompareFunc(x.ports, y.ports, comparePort))
}

func comparePort(a, b corev1.PortStatus) int {
	return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(strOf(a.Error), strOf(b.Error)))
}

func strOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

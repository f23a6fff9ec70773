package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/model"
)

// toAlloc converts a LoadBalancer Service for the allocator. An annotation or
// spec.loadBalancerIP that does not parse is an error wrapping
// alloc.ErrInvalidRequest that names the Service and the field.
func toAlloc(svc *corev1.Service, nsLabels map[string]string) (alloc.Service, error) {
	key := model.ServiceKey{Namespace: svc.Namespace, Name: svc.Name}
	out := alloc.Service{
		Key:                key,
		Created:            svc.CreationTimestamp.Time,
		Labels:             svc.Labels,
		NamespaceLabels:    nsLabels,
		Families:           families(svc),
		PreferDualStack:    svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyPreferDualStack,
		RequestedPool:      strings.TrimSpace(svc.Annotations[AnnotationAddressPool]),
		SharingKey:         strings.TrimSpace(svc.Annotations[AnnotationAllowSharedIP]),
		TrafficPolicyLocal: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
		Selector:           svc.Spec.Selector,
		Current:            ingressIPs(svc.Status.LoadBalancer.Ingress),
	}
	for _, p := range svc.Spec.Ports {
		proto := model.Protocol(p.Protocol)
		if proto == "" {
			proto = model.ProtocolTCP
		}
		out.Ports = append(out.Ports, alloc.Port{Protocol: proto, Port: p.Port})
	}
	req, err := requestedIPs(svc)
	if err != nil {
		return alloc.Service{}, fmt.Errorf("service %s: %w", key, err)
	}
	out.RequestedIPs = req
	return out, nil
}

// families is spec.ipFamilies, else the families of spec.clusterIPs, else [IPv4].
func families(svc *corev1.Service) []ipfamily.Family {
	var out []ipfamily.Family
	for _, f := range svc.Spec.IPFamilies {
		if fam, ok := ipfamily.Parse(string(f)); ok {
			out = append(out, fam)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, s := range svc.Spec.ClusterIPs {
		if ip, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, ipfamily.Of(ip)) {
			out = append(out, ipfamily.Of(ip))
		}
	}
	if len(out) > 0 {
		return out
	}
	return []ipfamily.Family{ipfamily.IPv4}
}

// requestedIPs reads the svcnet.io/loadBalancerIPs annotation (comma-separated;
// blank means unset) and spec.loadBalancerIP. When both are set they must name the
// same IPs.
func requestedIPs(svc *corev1.Service) ([]netip.Addr, error) {
	var fromAnn []netip.Addr
	if v := strings.TrimSpace(svc.Annotations[AnnotationLoadBalancerIPs]); v != "" {
		for _, s := range strings.Split(v, ",") {
			ip, err := parseIP(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("annotation %s: %w", AnnotationLoadBalancerIPs, err)
			}
			fromAnn = append(fromAnn, ip)
		}
	}
	var fromSpec []netip.Addr
	if v := strings.TrimSpace(svc.Spec.LoadBalancerIP); v != "" {
		ip, err := parseIP(v)
		if err != nil {
			return nil, fmt.Errorf("spec.loadBalancerIP: %w", err)
		}
		fromSpec = []netip.Addr{ip}
	}
	switch {
	case fromAnn == nil:
		return fromSpec, nil
	case fromSpec != nil && !slices.Equal(sortedAddrs(fromAnn), fromSpec):
		return nil, alloc.Reasonf(alloc.ErrInvalidRequest, "annotation %s %q and spec.loadBalancerIP %q disagree",
			AnnotationLoadBalancerIPs, svc.Annotations[AnnotationLoadBalancerIPs], svc.Spec.LoadBalancerIP)
	}
	return fromAnn, nil
}

func parseIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, alloc.Reasonf(alloc.ErrInvalidRequest, "%q is not an IP address", s)
	}
	return ip.Unmap(), nil
}

func sortedAddrs(ips []netip.Addr) []netip.Addr {
	out := slices.Clone(ips)
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// ingressIPs returns the IPs of status.loadBalancer.ingress (hostname-only and
// unparseable entries are skipped).
func ingressIPs(in []corev1.LoadBalancerIngress) []netip.Addr {
	var out []netip.Addr
	for _, ing := range in {
		if ip, err := netip.ParseAddr(ing.IP); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

package model

import (
	"fmt"
	"maps"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	corev1 "k8s.io/api/core/v1"
)

// ServiceFromAPI converts a v1 Service. It fails, naming the field, only on values
// the apiserver would have rejected (unparsable IPs or CIDRs), so a bad object from a
// file is refused rather than half-converted.
func ServiceFromAPI(in *corev1.Service) (*Service, error) {
	s := &Service{
		Namespace:                     in.Namespace,
		Name:                          in.Name,
		UID:                           string(in.UID),
		Type:                          ServiceType(in.Spec.Type),
		ExternalName:                  in.Spec.ExternalName,
		PublishNotReadyAddresses:      in.Spec.PublishNotReadyAddresses,
		HealthCheckNodePort:           in.Spec.HealthCheckNodePort,
		AllocateLoadBalancerNodePorts: in.Spec.AllocateLoadBalancerNodePorts == nil || *in.Spec.AllocateLoadBalancerNodePorts,
		Selector:                      maps.Clone(in.Spec.Selector),
		Labels:                        maps.Clone(in.Labels),
		Annotations:                   maps.Clone(in.Annotations),
	}
	if s.Type == "" {
		s.Type = ServiceTypeClusterIP
	}
	if in.Spec.LoadBalancerClass != nil {
		s.LoadBalancerClass = *in.Spec.LoadBalancerClass
	}
	if in.Spec.TrafficDistribution != nil {
		s.TrafficDistribution = *in.Spec.TrafficDistribution
	}
	ips := in.Spec.ClusterIPs
	if len(ips) == 0 && in.Spec.ClusterIP != "" {
		ips = []string{in.Spec.ClusterIP}
	}
	if len(ips) > 0 && ips[0] == corev1.ClusterIPNone {
		s.Headless = true
	} else {
		for i, a := range ips {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return nil, fmt.Errorf("service %s/%s: spec.clusterIPs[%d]: %w", in.Namespace, in.Name, i, err)
			}
			s.ClusterIPs = append(s.ClusterIPs, ip)
		}
	}
	if _, ok := in.Labels[LabelHeadless]; ok {
		s.Headless = true
	}
	for _, f := range in.Spec.IPFamilies {
		if fam, ok := ipfamily.Parse(string(f)); ok {
			s.IPFamilies = append(s.IPFamilies, fam)
		}
	}
	for _, p := range in.Spec.Ports {
		s.Ports = append(s.Ports, servicePortFromAPI(p))
	}
	var err error
	if s.ExternalIPs, err = parseAddrs(in.Spec.ExternalIPs, "spec.externalIPs"); err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", in.Namespace, in.Name, err)
	}
	for i, r := range in.Spec.LoadBalancerSourceRanges {
		p, err := parseSourceRange(r)
		if err != nil {
			return nil, fmt.Errorf("service %s/%s: spec.loadBalancerSourceRanges[%d]: %w", in.Namespace, in.Name, i, err)
		}
		s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, p)
	}
	for i, ing := range in.Status.LoadBalancer.Ingress {
		li := LoadBalancerIngress{Hostname: ing.Hostname, IPMode: IPModeVIP}
		if ing.IP != "" {
			ip, err := netip.ParseAddr(ing.IP)
			if err != nil {
				return nil, fmt.Errorf("service %s/%s: status.loadBalancer.ingress[%d].ip: %w", in.Namespace, in.Name, i, err)
			}
			li.IP = ip
		}
		if ing.IPMode != nil {
			li.IPMode = IPMode(*ing.IPMode)
		}
		s.LoadBalancerIngress = append(s.LoadBalancerIngress, li)
	}
	if s.Type == ServiceTypeNodePort || s.Type == ServiceTypeLoadBalancer {
		s.ExternalTrafficPolicy = TrafficPolicyCluster
		if in.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			s.ExternalTrafficPolicy = TrafficPolicyLocal
		}
	}
	s.InternalTrafficPolicy = TrafficPolicyCluster
	if in.Spec.InternalTrafficPolicy != nil && *in.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal {
		s.InternalTrafficPolicy = TrafficPolicyLocal
	}
	if in.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		s.AffinityClientIP = true
		s.AffinityTimeout = DefaultAffinityTimeout
		if c := in.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			s.AffinityTimeout = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
		}
	}
	return s, nil
}

func servicePortFromAPI(p corev1.ServicePort) ServicePort {
	sp := ServicePort{Name: p.Name, Protocol: Protocol(p.Protocol), Port: p.Port, NodePort: p.NodePort}
	if sp.Protocol == "" {
		sp.Protocol = ProtocolTCP
	}
	if p.AppProtocol != nil {
		sp.AppProtocol = *p.AppProtocol
	}
	switch {
	case p.TargetPort.StrVal != "":
		sp.TargetPortName = p.TargetPort.StrVal
	case p.TargetPort.IntVal != 0:
		sp.TargetPort = p.TargetPort.IntVal
	default:
		sp.TargetPort = p.Port
	}
	return sp
}

func parseAddrs(in []string, field string) ([]netip.Addr, error) {
	var out []netip.Addr
	for i, a := range in {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, ip)
	}
	return out, nil
}

// parseSourceRange accepts a CIDR (masked to its network) or, as kube-proxy does, a
// bare IP meaning a host route.
func parseSourceRange(r string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(r); err == nil {
		return p.Masked(), nil
	}
	ip, err := netip.ParseAddr(r)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", r)
	}
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}

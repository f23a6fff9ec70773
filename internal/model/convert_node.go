package model

import (
	"fmt"
	"maps"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// NodeFromAPI converts a v1 Node. Ready is the NodeReady condition being True;
// Terminating is a set deletion timestamp.
func NodeFromAPI(in *corev1.Node) (*Node, error) {
	n := &Node{Name: in.Name, Labels: maps.Clone(in.Labels), Terminating: in.DeletionTimestamp != nil}
	if len(in.Spec.Taints) > 0 {
		n.TaintKeys = make([]string, len(in.Spec.Taints))
		for i, t := range in.Spec.Taints {
			n.TaintKeys[i] = t.Key
		}
	}
	for _, a := range in.Status.Addresses {
		n.Addresses = append(n.Addresses, NodeAddress{Type: string(a.Type), Address: a.Address})
	}
	cidrs := in.Spec.PodCIDRs
	if len(cidrs) == 0 && in.Spec.PodCIDR != "" {
		cidrs = []string{in.Spec.PodCIDR}
	}
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("node %s: spec.podCIDRs[%d]: %w", in.Name, i, err)
		}
		n.PodCIDRs = append(n.PodCIDRs, p.Masked())
	}
	for _, c := range in.Status.Conditions {
		if c.Type == corev1.NodeReady {
			n.Ready = c.Status == corev1.ConditionTrue
		}
	}
	return n, nil
}

// PodFromAPI converts a v1 Pod. Ready is the PodReady condition being True;
// Terminating is a set deletion timestamp.
func PodFromAPI(in *corev1.Pod) (*Pod, error) {
	p := &Pod{
		Namespace:   in.Namespace,
		Name:        in.Name,
		NodeName:    in.Spec.NodeName,
		Labels:      maps.Clone(in.Labels),
		Terminating: in.DeletionTimestamp != nil,
		Phase:       string(in.Status.Phase),
		Hostname:    in.Spec.Hostname,
		Subdomain:   in.Spec.Subdomain,
		HostNetwork: in.Spec.HostNetwork,
	}
	ips := in.Status.PodIPs
	if len(ips) == 0 && in.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: in.Status.PodIP}}
	}
	for i, a := range ips {
		ip, err := netip.ParseAddr(a.IP)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: status.podIPs[%d]: %w", in.Namespace, in.Name, i, err)
		}
		p.IPs = append(p.IPs, ip)
	}
	for _, c := range in.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.Ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, c := range in.Spec.Containers {
		for _, cp := range c.Ports {
			proto := Protocol(cp.Protocol)
			if proto == "" {
				proto = ProtocolTCP
			}
			p.ContainerPorts = append(p.ContainerPorts, ContainerPort{
				Container: c.Name, Name: cp.Name, Protocol: proto,
				ContainerPort: cp.ContainerPort, HostPort: cp.HostPort, HostIP: cp.HostIP,
			})
		}
	}
	return p, nil
}

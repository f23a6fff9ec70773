package controlplane

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// preparePod does the apiserver's defaulting that matters to Service networking:
// status.podIPs from a lone status.podIP (podIP wins when both are set and differ,
// as in v1 conversion), podIP from podIPs[0], container port protocol TCP.
func preparePod(p *corev1.Pod) {
	p.TypeMeta = typePod
	st := &p.Status
	if st.PodIP != "" && (len(st.PodIPs) == 0 || st.PodIPs[0].IP != st.PodIP) {
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	if len(st.PodIPs) > 0 {
		st.PodIP = st.PodIPs[0].IP
	}
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			for j := range cs[i].Ports {
				if cs[i].Ports[j].Protocol == "" {
					cs[i].Ports[j].Protocol = corev1.ProtocolTCP
				}
			}
		}
	}
}

// validatePod is the part of the apiserver's Pod validation that Service
// networking depends on: metadata, hostname and subdomain, container ports and
// status.podIPs. The rest of the Pod spec (images, volumes, ...) is not checked.
func validatePod(p *corev1.Pod) field.ErrorList {
	errs := validateObjectMeta(&p.ObjectMeta, true, validateSubdomainName)
	spec := pathSpec
	if p.Spec.Hostname != "" {
		errs = append(errs, validateDNS1123Label(p.Spec.Hostname, spec.Child("hostname"))...)
	}
	if p.Spec.Subdomain != "" {
		errs = append(errs, validateDNS1123Label(p.Spec.Subdomain, spec.Child("subdomain"))...)
	}
	for i, c := range p.Spec.InitContainers {
		errs = append(errs, validateContainerPorts(c.Ports, spec.Child("initContainers").Index(i).Child("ports"))...)
	}
	for i, c := range p.Spec.Containers {
		errs = append(errs, validateContainerPorts(c.Ports, spec.Child("containers").Index(i).Child("ports"))...)
	}
	return append(errs, validatePodIPs(p.Status.PodIPs)...)
}

func validateContainerPorts(ports []corev1.ContainerPort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.Set[string]{}
	for i, port := range ports {
		p := fld.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), ""))
		} else {
			errs = append(errs, validatePortNum(port.ContainerPort, p.Child("containerPort"))...)
		}
		if port.HostPort != 0 {
			errs = append(errs, validatePortNum(port.HostPort, p.Child("hostPort"))...)
		}
		errs = append(errs, validateProtocol(string(port.Protocol), p.Child("protocol"))...)
	}
	return errs
}

func validatePodIPs(ips []corev1.PodIP) field.ErrorList {
	var errs field.ErrorList
	fld := field.NewPath("status", "podIPs")
	strs := make([]string, 0, len(ips))
	for i, ip := range ips {
		errs = append(errs, validateLegacyIP(ip.IP, fld.Index(i))...)
		strs = append(strs, ip.IP)
	}
	if len(ips) > 1 && (!isDualStack(strs) || len(ips) > 2) {
		// The apiserver prints its internal type, whose JSON field is "IP".
		type podIP struct{ IP string }
		bad := make([]podIP, len(strs))
		for i, s := range strs {
			bad[i] = podIP{s}
		}
		errs = append(errs, field.Invalid(fld, bad, "may specify no more than one IP for each IP family"))
	}
	return errs
}

// prepareNode mirrors v1 conversion of spec.podCIDR and spec.podCIDRs.
func prepareNode(n *corev1.Node) {
	n.TypeMeta = typeNode
	s := &n.Spec
	if s.PodCIDR != "" && (len(s.PodCIDRs) == 0 || s.PodCIDRs[0] != s.PodCIDR) {
		s.PodCIDRs = []string{s.PodCIDR}
	}
	if len(s.PodCIDRs) > 0 {
		s.PodCIDR = s.PodCIDRs[0]
	}
}

// validateNode is the apiserver's ValidateNode for metadata and spec.podCIDRs.
func validateNode(n *corev1.Node) field.ErrorList {
	errs := validateObjectMeta(&n.ObjectMeta, false, validateSubdomainName)
	cidrs := n.Spec.PodCIDRs
	fld := field.NewPath("spec", "podCIDRs")
	for i, c := range cidrs {
		errs = append(errs, validateLegacyCIDR(c, fld.Index(i))...)
	}
	if len(cidrs) > 1 && (!isDualStackCIDRs(cidrs) || len(cidrs) > 2) {
		errs = append(errs, field.Invalid(fld, cidrs, "may specify no more than one CIDR for each IP family"))
	}
	return errs
}

func isDualStackCIDRs(cidrs []string) bool {
	var ips []string
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			ips = append(ips, p.Addr().String())
		}
	}
	return isDualStack(ips)
}

// prepareNamespace is the Namespace defaulting and PrepareForCreate: the
// kubernetes.io/metadata.name label, phase Active, the "kubernetes" finalizer.
func prepareNamespace(ns *corev1.Namespace) {
	ns.TypeMeta = typeNamespace
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	return validateObjectMeta(&ns.ObjectMeta, false, validateNamespaceName)
}

// systemNamespaces are the Namespaces the apiserver creates at start.
var systemNamespaces = []string{"default", "kube-node-lease", "kube-public", "kube-system"}

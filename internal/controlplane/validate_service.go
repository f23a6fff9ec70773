package controlplane

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedSessionAffinity = sets.New(corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone)
	supportedServiceTypes    = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)
	supportedExternalTrafficPolicy = sets.New(corev1.ServiceExternalTrafficPolicyCluster,
		corev1.ServiceExternalTrafficPolicyLocal)
	supportedInternalTrafficPolicy = sets.New(corev1.ServiceInternalTrafficPolicyCluster,
		corev1.ServiceInternalTrafficPolicyLocal)
	// PreferSameTrafficDistribution is GA in v1.35.
	supportedTrafficDistribution = []string{corev1.ServiceTrafficDistributionPreferClose,
		corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode}
)

// maxClientIPAffinitySeconds is core.MaxClientIPServiceAffinitySeconds.
const maxClientIPAffinitySeconds = 86400

// Annotations validateService looks at.
const (
	annotationTopologyAwareHints = "service.kubernetes.io/topology-aware-hints"
	annotationTopologyMode       = "service.kubernetes.io/topology-mode"
	annotationLBSourceRanges     = "service.beta.kubernetes.io/load-balancer-source-ranges"
)

// validateServiceCreate is the apiserver's ValidateServiceCreate on a defaulted,
// not yet allocated Service. The one rule it leaves out is "healthCheckNodePort
// required" for LoadBalancer/Local: the allocator fills that field in, and the
// apiserver validates after allocating.
func validateServiceCreate(svc *corev1.Service) field.ErrorList {
	errs := validateObjectMeta(&svc.ObjectMeta, true, validateServiceName)
	errs = append(errs, validateServiceTopologyAnnotations(svc)...)
	errs = append(errs, validateServiceTypeFields(svc)...)
	errs = append(errs, validateServicePorts(svc)...)
	spec := pathSpec
	if svc.Spec.Selector != nil {
		errs = append(errs, validateLabels(svc.Spec.Selector, spec.Child("selector"))...)
	}
	errs = append(errs, validateSessionAffinity(svc)...)
	errs = append(errs, validateClusterIPsRelatedFields(svc)...)
	for i, ip := range svc.Spec.ExternalIPs {
		p := spec.Child("externalIPs").Index(i)
		if e := validateLegacyIP(ip, p); len(e) != 0 {
			errs = append(errs, e...)
		} else {
			errs = append(errs, validateEndpointIP(ip, p)...)
		}
	}
	if svc.Spec.Type == "" {
		errs = append(errs, field.Required(spec.Child("type"), ""))
	} else if !supportedServiceTypes.Has(svc.Spec.Type) {
		errs = append(errs, field.NotSupported(spec.Child("type"), svc.Spec.Type, sets.List(supportedServiceTypes)))
	}
	errs = append(errs, validateServiceNodePorts(svc)...)
	errs = append(errs, validateDuplicatePorts(svc)...)
	errs = append(errs, validateSourceRanges(svc)...)
	if svc.Spec.AllocateLoadBalancerNodePorts != nil && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(spec.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	errs = append(errs, validateLoadBalancerClass(svc)...)
	errs = append(errs, validateExternalTrafficPolicy(svc)...)
	errs = append(errs, validateInternalTrafficPolicy(svc)...)
	errs = append(errs, validateTrafficDistribution(svc)...)
	return errs
}

func validateServiceTopologyAnnotations(svc *corev1.Service) field.ErrorList {
	hints, hintsSet := svc.Annotations[annotationTopologyAwareHints]
	mode, modeSet := svc.Annotations[annotationTopologyMode]
	if modeSet && hintsSet && mode != hints {
		msg := fmt.Sprintf("must match annotations[%s] when both are specified", annotationTopologyAwareHints)
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(annotationTopologyMode), mode, msg)}
	}
	return nil
}

// validateServiceTypeFields: ports required, and what each type forbids.
func validateServiceTypeFields(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := pathSpec
	if len(svc.Spec.Ports) == 0 && !isHeadless(svc) && svc.Spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(spec.Child("ports"), ""))
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if isHeadless(svc) {
			msg := fmt.Sprintf("may not be set to 'None' for %s services", svc.Spec.Type)
			errs = append(errs, field.Invalid(spec.Child("clusterIPs").Index(0), svc.Spec.ClusterIPs[0], msg))
		}
	case corev1.ServiceTypeExternalName:
		if len(svc.Spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(svc.Spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if svc.Spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(spec.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		// The value (a CNAME) may have a trailing dot to denote it as fully qualified.
		if cname := strings.TrimSuffix(svc.Spec.ExternalName, "."); cname != "" {
			errs = append(errs, validateDNS1123Subdomain(cname, spec.Child("externalName"))...)
		} else {
			errs = append(errs, field.Required(spec.Child("externalName"), ""))
		}
	}
	return errs
}

// servicePortKey mirrors the internal core.ServicePort, whose JSON form the
// apiserver prints in "Duplicate value" errors for spec.ports.
type servicePortKey struct {
	Name        string
	Protocol    corev1.Protocol
	AppProtocol *string
	Port        int32
	TargetPort  intstr.IntOrString
	NodePort    int32
}

func validateServicePorts(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	names := sets.Set[string]{}
	ports := pathSpecPorts
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		errs = append(errs, validateServicePort(sp, len(svc.Spec.Ports) > 1, names, ports.Index(i))...)
	}
	return errs
}

// validateDuplicatePorts: no (protocol, port) twice.
func validateDuplicatePorts(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	ports := pathSpecPorts
	seen := map[servicePortKey]bool{}
	for i, sp := range svc.Spec.Ports {
		key := servicePortKey{Protocol: sp.Protocol, Port: sp.Port}
		if seen[key] {
			errs = append(errs, field.Duplicate(ports.Index(i), key))
		}
		seen[key] = true
	}
	return errs
}

func validateServicePort(sp *corev1.ServicePort, requireName bool, names sets.Set[string], fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && sp.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	} else if sp.Name != "" {
		errs = append(errs, validateDNS1123Label(sp.Name, fld.Child("name"))...)
		if names.Has(sp.Name) {
			errs = append(errs, field.Duplicate(fld.Child("name"), sp.Name))
		} else {
			names.Insert(sp.Name)
		}
	}
	errs = append(errs, validatePortNum(sp.Port, fld.Child("port"))...)
	errs = append(errs, validateProtocol(string(sp.Protocol), fld.Child("protocol"))...)
	errs = append(errs, validatePortNumOrName(sp.TargetPort, fld.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*sp.AppProtocol, fld.Child("appProtocol"))...)
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(fld, port.IntValue(), msg))
		}
	} else {
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(fld, port.StrVal, msg))
		}
	}
	return errs
}

func validateSessionAffinity(svc *corev1.Service) field.ErrorList {
	spec := pathSpec
	aff := svc.Spec.SessionAffinity
	switch {
	case aff == "":
		return field.ErrorList{field.Required(spec.Child("sessionAffinity"), "")}
	case !supportedSessionAffinity.Has(aff):
		return field.ErrorList{field.NotSupported(spec.Child("sessionAffinity"), aff, sets.List(supportedSessionAffinity))}
	case aff == corev1.ServiceAffinityClientIP:
		return validateClientIPAffinityConfig(svc.Spec.SessionAffinityConfig, spec.Child("sessionAffinityConfig"))
	case svc.Spec.SessionAffinityConfig != nil:
		return field.ErrorList{field.Forbidden(spec.Child("sessionAffinityConfig"), "must not be set when session affinity is None")}
	}
	return nil
}

func validateClientIPAffinityConfig(c *corev1.SessionAffinityConfig, fld *field.Path) field.ErrorList {
	when := "when session affinity type is ClientIP"
	switch {
	case c == nil:
		return field.ErrorList{field.Required(fld, when)}
	case c.ClientIP == nil:
		return field.ErrorList{field.Required(fld.Child("clientIP"), when)}
	case c.ClientIP.TimeoutSeconds == nil:
		return field.ErrorList{field.Required(fld.Child("clientIP", "timeoutSeconds"), when)}
	}
	t := c.ClientIP.TimeoutSeconds
	if *t <= 0 || *t > maxClientIPAffinitySeconds {
		msg := fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds)
		return field.ErrorList{field.Invalid(fld.Child("clientIP", "timeoutSeconds"), t, msg)}
	}
	return nil
}

// validateServiceNodePorts: no nodePort on ClusterIP, no (protocol, nodePort) twice.
func validateServiceNodePorts(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	ports := pathSpecPorts
	if svc.Spec.Type == corev1.ServiceTypeClusterIP {
		for i, sp := range svc.Spec.Ports {
			if sp.NodePort != 0 {
				errs = append(errs, field.Forbidden(ports.Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}
	type key struct {
		proto corev1.Protocol
		port  int32
	}
	seen := map[key]bool{}
	for i, sp := range svc.Spec.Ports {
		if sp.NodePort == 0 {
			continue
		}
		k := key{sp.Protocol, sp.NodePort}
		if seen[k] {
			errs = append(errs, field.Duplicate(ports.Index(i).Child("nodePort"), sp.NodePort))
		}
		seen[k] = true
	}
	return errs
}

// validateSourceRanges checks spec.loadBalancerSourceRanges (the apiserver's field
// path really is capitalised) or, when that is empty, the legacy annotation.
func validateSourceRanges(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	notLB := svc.Spec.Type != corev1.ServiceTypeLoadBalancer
	const onlyLB = "may only be used when `type` is 'LoadBalancer'"
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		fld := field.NewPath("spec", "LoadBalancerSourceRanges")
		if notLB {
			errs = append(errs, field.Forbidden(fld, onlyLB))
		}
		for i, v := range svc.Spec.LoadBalancerSourceRanges {
			errs = append(errs, validateLegacyCIDR(strings.TrimSpace(v), fld.Index(i))...)
		}
		return errs
	}
	val, ok := svc.Annotations[annotationLBSourceRanges]
	if !ok {
		return nil
	}
	fld := field.NewPath("metadata", "annotations").Key(annotationLBSourceRanges)
	if notLB {
		errs = append(errs, field.Forbidden(fld, onlyLB))
	}
	if val = strings.TrimSpace(val); val != "" {
		for _, v := range strings.Split(val, ",") {
			errs = append(errs, validateLegacyCIDR(strings.TrimSpace(v), fld)...)
		}
	}
	return errs
}

func validateLoadBalancerClass(svc *corev1.Service) field.ErrorList {
	c := svc.Spec.LoadBalancerClass
	fld := pathSpecLoadBalancerClass
	switch {
	case c == nil:
		return nil
	case svc.Spec.Type == corev1.ServiceTypeLoadBalancer:
		return validateQualifiedName(*c, fld)
	}
	return field.ErrorList{field.Forbidden(fld, "may only be used when `type` is 'LoadBalancer'")}
}

// validateExternalTrafficPolicy also checks a requested healthCheckNodePort.
func validateExternalTrafficPolicy(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := pathSpec
	etp := svc.Spec.ExternalTrafficPolicy
	if !externallyAccessible(svc) {
		if etp != "" {
			errs = append(errs, field.Invalid(spec.Child("externalTrafficPolicy"), etp,
				"may only be set for externally-accessible services"))
		}
	} else if etp == "" {
		errs = append(errs, field.Required(spec.Child("externalTrafficPolicy"), ""))
	} else if !supportedExternalTrafficPolicy.Has(etp) {
		errs = append(errs, field.NotSupported(spec.Child("externalTrafficPolicy"), etp, sets.List(supportedExternalTrafficPolicy)))
	}
	hc := svc.Spec.HealthCheckNodePort
	if !needsHealthCheck(svc) && hc != 0 {
		errs = append(errs, field.Invalid(spec.Child("healthCheckNodePort"), hc,
			"may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
	} else if hc != 0 {
		errs = append(errs, validatePortNum(hc, spec.Child("healthCheckNodePort"))...)
	}
	return errs
}

func validateInternalTrafficPolicy(svc *corev1.Service) field.ErrorList {
	fld := pathSpecInternalTrafficPolicy
	itp := svc.Spec.InternalTrafficPolicy
	if itp == nil {
		if needsClusterIP(svc) {
			return field.ErrorList{field.Required(fld, "")}
		}
		return nil
	}
	if !supportedInternalTrafficPolicy.Has(*itp) {
		return field.ErrorList{field.NotSupported(fld, *itp, sets.List(supportedInternalTrafficPolicy))}
	}
	return nil
}

func validateTrafficDistribution(svc *corev1.Service) field.ErrorList {
	td := svc.Spec.TrafficDistribution
	if td == nil {
		return nil
	}
	for _, v := range supportedTrafficDistribution {
		if *td == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(pathSpec.Child("trafficDistribution"), *td, supportedTrafficDistribution)}
}

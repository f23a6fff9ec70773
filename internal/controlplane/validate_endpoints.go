//lint:file-ignore SA1019 legacy v1 Endpoints are read and mirrored on purpose, as kube-controller-manager does

package controlplane

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// EndpointSlice limits of the discovery API validation.
const (
	maxSliceEndpoints  = 1000
	maxSliceAddresses  = 100
	maxSlicePorts      = 20000
	maxTopologyLabels  = 16
	maxZoneOrNodeHints = 8
)

var supportedAddressTypes = sets.New(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)

// validateEndpointIP is the apiserver's ValidateEndpointIP: no unspecified,
// loopback, link-local or link-local multicast address.
func validateEndpointIP(ip string, fld *field.Path) field.ErrorList {
	a := netutils.ParseIPSloppy(ip)
	if a == nil {
		return field.ErrorList{field.Invalid(fld, ip, "must be a valid IP address")}
	}
	var errs field.ErrorList
	if a.IsUnspecified() {
		errs = append(errs, field.Invalid(fld, ip, fmt.Sprintf("may not be unspecified (%v)", ip)))
	}
	if a.IsLoopback() {
		errs = append(errs, field.Invalid(fld, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if a.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(fld, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if a.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(fld, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

// prepareEndpoints is SetDefaults_Endpoints: port protocol TCP.
func prepareEndpoints(ep *corev1.Endpoints) {
	ep.TypeMeta.APIVersion, ep.TypeMeta.Kind = "v1", kindEndpoints
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if ep.Subsets[i].Ports[j].Protocol == "" {
				ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// validateEndpoints is the apiserver's ValidateEndpointsCreate.
func validateEndpoints(ep *corev1.Endpoints) field.ErrorList {
	errs := validateObjectMeta(&ep.ObjectMeta, true, validateSubdomainName)
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		p := field.NewPath("subsets").Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(p, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&ss.Addresses[j], p.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[j], p.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			errs = append(errs, validateEndpointPort(&ss.Ports[j], len(ss.Ports) > 1, p.Child("ports").Index(j))...)
		}
	}
	return errs
}

func validateEndpointAddress(a *corev1.EndpointAddress, fld *field.Path) field.ErrorList {
	errs := validateLegacyIP(a.IP, fld.Child("ip"))
	if a.Hostname != "" {
		errs = append(errs, validateDNS1123Label(a.Hostname, fld.Child("hostname"))...)
	}
	if a.NodeName != nil {
		for _, msg := range validateSubdomainName(*a.NodeName, false) {
			errs = append(errs, field.Invalid(fld.Child("nodeName"), *a.NodeName, msg))
		}
	}
	return append(errs, validateEndpointIP(a.IP, fld.Child("ip"))...)
}

func validateEndpointPort(p *corev1.EndpointPort, requireName bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && p.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	} else if p.Name != "" {
		errs = append(errs, validateDNS1123Label(p.Name, fld.Child("name"))...)
	}
	errs = append(errs, validatePortNum(p.Port, fld.Child("port"))...)
	errs = append(errs, validateProtocol(string(p.Protocol), fld.Child("protocol"))...)
	if p.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*p.AppProtocol, fld.Child("appProtocol"))...)
	}
	return errs
}

// prepareSlice is the discovery/v1 defaulting: port name "" and protocol TCP.
func prepareSlice(s *discoveryv1.EndpointSlice) {
	s.TypeMeta = typeSlice
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Name == nil {
			p.Name = new(string)
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}

// validateSlice is the apiserver's ValidateEndpointSliceCreate.
func validateSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	errs := validateObjectMeta(&s.ObjectMeta, true, validateSubdomainName)
	switch {
	case s.AddressType == "":
		errs = append(errs, field.Required(field.NewPath("addressType"), ""))
	case !supportedAddressTypes.Has(s.AddressType):
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, sets.List(supportedAddressTypes)))
	}
	errs = append(errs, validateSlicePorts(s.Ports, field.NewPath("ports"))...)
	return append(errs, validateSliceEndpoints(s.Endpoints, s.AddressType, field.NewPath("endpoints"))...)
}

func validateSlicePorts(ports []discoveryv1.EndpointPort, fld *field.Path) field.ErrorList {
	if len(ports) > maxSlicePorts {
		return field.ErrorList{field.TooMany(fld, len(ports), maxSlicePorts)}
	}
	var errs field.ErrorList
	names := make([]string, 0, len(ports))
	for i, p := range ports {
		idx := fld.Index(i)
		if *p.Name != "" {
			errs = append(errs, validateDNS1123Label(*p.Name, idx.Child("name"))...)
		}
		if slices.Contains(names, *p.Name) {
			errs = append(errs, field.Duplicate(idx.Child("name"), p.Name))
		} else {
			names = append(names, *p.Name)
		}
		errs = append(errs, validateProtocol(string(*p.Protocol), idx.Child("protocol"))...)
		if p.AppProtocol != nil {
			errs = append(errs, validateQualifiedName(*p.AppProtocol, idx.Child("appProtocol"))...)
		}
	}
	return errs
}

func validateSliceEndpoints(eps []discoveryv1.Endpoint, at discoveryv1.AddressType, fld *field.Path) field.ErrorList {
	if len(eps) > maxSliceEndpoints {
		return field.ErrorList{field.TooMany(fld, len(eps), maxSliceEndpoints)}
	}
	var errs field.ErrorList
	for i, ep := range eps {
		idx := fld.Index(i)
		errs = append(errs, validateSliceAddresses(ep.Addresses, at, idx.Child("addresses"))...)
		if ep.NodeName != nil {
			for _, msg := range validateSubdomainName(*ep.NodeName, false) {
				errs = append(errs, field.Invalid(idx.Child("nodeName"), *ep.NodeName, msg))
			}
		}
		topo := idx.Child("deprecatedTopology")
		if len(ep.DeprecatedTopology) > maxTopologyLabels {
			errs = append(errs, field.TooMany(topo, len(ep.DeprecatedTopology), maxTopologyLabels))
		}
		errs = append(errs, validateLabels(ep.DeprecatedTopology, topo)...)
		if ep.Hostname != nil {
			errs = append(errs, validateDNS1123Label(*ep.Hostname, idx.Child("hostname"))...)
		}
		if ep.Hints != nil {
			errs = append(errs, validateHints(ep.Hints, idx.Child("hints"))...)
		}
	}
	return errs
}

func validateSliceAddresses(addrs []string, at discoveryv1.AddressType, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(addrs) == 0 {
		errs = append(errs, field.Required(fld, "must contain at least 1 address"))
	} else if len(addrs) > maxSliceAddresses {
		errs = append(errs, field.TooMany(fld, len(addrs), maxSliceAddresses))
	}
	for i, a := range addrs {
		p := fld.Index(i)
		switch at {
		case discoveryv1.AddressTypeIPv4:
			if e := validateLegacyIP(a, p); len(e) > 0 {
				errs = append(errs, e...)
				continue
			}
			if familyOf(a) != corev1.IPv4Protocol {
				errs = append(errs, field.Invalid(fld, a, "must be an IPv4 address"))
			}
			errs = append(errs, validateEndpointIP(a, p)...)
		case discoveryv1.AddressTypeIPv6:
			if e := validation.IsValidIP(p, a); len(e) > 0 {
				errs = append(errs, e...)
				continue
			}
			if familyOf(a) != corev1.IPv6Protocol {
				errs = append(errs, field.Invalid(fld, a, "must be an IPv6 address"))
			}
			errs = append(errs, validateEndpointIP(a, p)...)
		case discoveryv1.AddressTypeFQDN:
			errs = append(errs, validation.IsFullyQualifiedDomainName(p, a)...)
		}
	}
	return errs
}

func validateHints(h *discoveryv1.EndpointHints, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	zones := fld.Child("forZones")
	if len(h.ForZones) > maxZoneOrNodeHints {
		return field.ErrorList{field.TooMany(zones, len(h.ForZones), maxZoneOrNodeHints)}
	}
	seen := sets.Set[string]{}
	for i, z := range h.ForZones {
		p := zones.Index(i).Child("name")
		if seen.Has(z.Name) {
			errs = append(errs, field.Duplicate(p, z.Name))
		}
		seen.Insert(z.Name)
		for _, msg := range validation.IsValidLabelValue(z.Name) {
			errs = append(errs, field.Invalid(p, z.Name, msg))
		}
	}
	nodes := fld.Child("forNodes")
	if len(h.ForNodes) > maxZoneOrNodeHints {
		return append(errs, field.TooMany(nodes, len(h.ForNodes), maxZoneOrNodeHints))
	}
	seen = sets.Set[string]{}
	for i, n := range h.ForNodes {
		p := nodes.Index(i).Child("name")
		if seen.Has(n.Name) {
			errs = append(errs, field.Duplicate(p, n.Name))
		}
		seen.Insert(n.Name)
		for _, msg := range validateSubdomainName(n.Name, false) {
			errs = append(errs, field.Invalid(p, n.Name, msg))
		}
	}
	return errs
}

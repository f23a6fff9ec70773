package controlplane

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedIPFamilies     = sets.New(corev1.IPv4Protocol, corev1.IPv6Protocol)
	supportedIPFamilyPolicy = sets.New(corev1.IPFamilyPolicySingleStack,
		corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)
)

// validateClusterIPsRelatedFields is ValidateServiceClusterIPsRelatedFields for a
// create: clusterIP and clusterIPs in sync, valid and at most one per family,
// ipFamilies and ipFamilyPolicy supported, and each IP of its listed family.
func validateClusterIPsRelatedFields(svc *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	ipsFld := pathSpecClusterIPs
	ips := svc.Spec.ClusterIPs
	if svc.Spec.ClusterIP != "" {
		if len(ips) == 0 {
			errs = append(errs, field.Required(ipsFld, ""))
		} else if ips[0] != svc.Spec.ClusterIP {
			errs = append(errs, field.Invalid(ipsFld, ips, "first value must match `clusterIP`"))
		}
	} else if len(ips) != 0 {
		errs = append(errs, field.Invalid(ipsFld, ips, "must be empty when `clusterIP` is not specified"))
	}
	errs = append(errs, validateIPFamiliesField(svc)...)
	ipErrs := validateClusterIPValues(ips, ipsFld)
	errs = append(errs, ipErrs...)
	if len(ips) > 2 {
		errs = append(errs, field.Invalid(ipsFld, ips, "may only hold up to 2 values"))
	}
	if len(ipErrs) != 0 {
		return errs
	}
	if len(ips) > 1 && !isDualStack(ips) {
		errs = append(errs, field.Invalid(ipsFld, ips, "may specify no more than one IP for each IP family"))
	}
	if isHeadless(svc) {
		return errs
	}
	for i, ip := range ips {
		if i >= len(svc.Spec.IPFamilies) {
			break
		}
		fam := svc.Spec.IPFamilies[i]
		if fam == corev1.IPv4Protocol && familyOf(ip) == corev1.IPv6Protocol {
			errs = append(errs, field.Invalid(ipsFld.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%v]`", i)))
		}
		if fam == corev1.IPv6Protocol && familyOf(ip) != corev1.IPv6Protocol {
			errs = append(errs, field.Invalid(ipsFld.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%v]`", i)))
		}
	}
	return errs
}

func validateIPFamiliesField(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	famFld := pathSpecIPFamilies
	seen := sets.Set[corev1.IPFamily]{}
	for i, f := range svc.Spec.IPFamilies {
		if !supportedIPFamilies.Has(f) {
			errs = append(errs, field.NotSupported(famFld.Index(i), f, sets.List(supportedIPFamilies)))
		}
		if seen.Has(f) {
			errs = append(errs, field.Duplicate(famFld.Index(i), f))
		}
		seen.Insert(f)
	}
	if p := svc.Spec.IPFamilyPolicy; p != nil && !supportedIPFamilyPolicy.Has(*p) {
		errs = append(errs, field.NotSupported(pathSpecIPFamilyPolicy, p, sets.List(supportedIPFamilyPolicy)))
	}
	return errs
}

// validateClusterIPValues: each a valid IP, "None" only as the first and only value.
func validateClusterIPValues(ips []string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range ips {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(ips) > 1 {
				errs = append(errs, field.Invalid(fld, ips, "'None' must be the first and only value"))
			}
			continue
		}
		errs = append(errs, validateLegacyIP(ip, fld.Index(i))...)
	}
	return errs
}

// familyOf returns the family of a valid IP string, "" for anything else.
func familyOf(ip string) corev1.IPFamily {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return ""
	case a.Is4():
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// isDualStack is netutils.IsDualStackIPStrings: at least one IP of each family.
func isDualStack(ips []string) bool {
	var v4, v6 bool
	for _, ip := range ips {
		switch familyOf(ip) {
		case corev1.IPv4Protocol:
			v4 = true
		case corev1.IPv6Protocol:
			v6 = true
		}
	}
	return v4 && v6
}

// otherFamily returns the family that is not f.
func otherFamily(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// initIPFamilyFields is the allocator's initIPFamilyFields for a create: it defaults
// ipFamilyPolicy (SingleStack, or RequireDualStack for headless without selector)
// and ipFamilies against the cluster's families (primary first), and rejects what
// the cluster cannot serve. The Service must already have passed validation.
func initIPFamilyFields(svc *corev1.Service, families []corev1.IPFamily) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	spec := &svc.Spec
	headlessNoSelector := spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0
	if spec.IPFamilyPolicy == nil {
		p := corev1.IPFamilyPolicySingleStack
		if headlessNoSelector {
			p = corev1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &p
	}
	policy := *spec.IPFamilyPolicy
	configured := sets.New(families...)
	errs := checkPolicyAgainstFields(svc)
	errs = append(errs, inferFamiliesFromIPs(svc, configured)...)
	if len(errs) > 0 {
		return errs
	}
	if headlessNoSelector {
		if len(spec.IPFamilies) == 0 {
			spec.IPFamilies = []corev1.IPFamily{families[0]}
		}
		if len(spec.IPFamilies) < 2 && policy != corev1.IPFamilyPolicySingleStack {
			spec.IPFamilies = append(spec.IPFamilies, otherFamily(spec.IPFamilies[0]))
		}
		return nil
	}
	policyFld := pathSpecIPFamilyPolicy
	if policy == corev1.IPFamilyPolicyRequireDualStack && len(families) < 2 {
		errs = append(errs, field.Invalid(policyFld, spec.IPFamilyPolicy, "this cluster is not configured for dual-stack services"))
	}
	for i, f := range spec.IPFamilies {
		if !configured.Has(f) {
			errs = append(errs, field.Invalid(pathSpecIPFamilies.Index(i), f, "not configured on this cluster"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{families[0]}
	}
	if policy != corev1.IPFamilyPolicySingleStack && len(spec.IPFamilies) == 1 && len(families) == 2 {
		spec.IPFamilies = append(spec.IPFamilies, otherFamily(spec.IPFamilies[0]))
	}
	return nil
}

// checkPolicyAgainstFields: SingleStack may not come with two IPs or families.
func checkPolicyAgainstFields(svc *corev1.Service) field.ErrorList {
	spec := &svc.Spec
	if *spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		return nil
	}
	var errs field.ErrorList
	fld := pathSpecIPFamilyPolicy
	if len(spec.ClusterIPs) == 2 {
		errs = append(errs, field.Invalid(fld, spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
	}
	if len(spec.IPFamilies) == 2 {
		errs = append(errs, field.Invalid(fld, spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
	}
	return errs
}

// inferFamiliesFromIPs appends the family of each requested clusterIP that has no
// ipFamilies entry yet, or reports the family as not configured.
func inferFamiliesFromIPs(svc *corev1.Service, configured sets.Set[corev1.IPFamily]) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	for i, ip := range spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			break
		}
		if i < len(spec.IPFamilies) {
			continue
		}
		fam := familyOf(ip)
		if !configured.Has(fam) {
			errs = append(errs, field.Invalid(pathSpecClusterIPs.Index(i), spec.ClusterIPs,
				fmt.Sprintf("%s is not configured on this cluster", fam)))
			continue
		}
		spec.IPFamilies = append(spec.IPFamilies, fam)
	}
	return errs
}

package controlplane

import (
	"sort"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Name rules per kind, as kube-apiserver v1.36 applies them on create. Service names
// are DNS-1123 labels: RelaxedServiceNameValidation is beta and on by default in
// v1.36, so a name may start with a digit (it was DNS-1035 before).
var (
	validateServiceName   = apimachineryvalidation.NameIsDNSLabel
	validateNamespaceName = apimachineryvalidation.ValidateNamespaceName
	validateSubdomainName = apimachineryvalidation.NameIsDNSSubdomain
)

// supportedPortProtocols are the protocols of Service, container and endpoint ports.
var supportedPortProtocols = sets.New("SCTP", "TCP", "UDP")

// validateObjectMeta is the apiserver's ValidateObjectMeta for a create, except that
// label and annotation keys are checked in sorted order so that several errors
// always come in the same order.
func validateObjectMeta(m *metav1.ObjectMeta, namespaced bool, nameFn apimachineryvalidation.ValidateNameFunc) field.ErrorList {
	fld := pathMetadata
	var errs field.ErrorList
	if m.GenerateName != "" {
		for _, msg := range nameFn(m.GenerateName, true) {
			errs = append(errs, field.Invalid(fld.Child("generateName"), m.GenerateName, msg))
		}
	}
	if m.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), "name or generateName is required"))
	} else {
		for _, msg := range nameFn(m.Name, false) {
			errs = append(errs, field.Invalid(fld.Child("name"), m.Name, msg))
		}
	}
	errs = append(errs, validateNamespaceField(m.Namespace, namespaced, pathMetadataNamespace)...)
	errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(m.Generation, pathMetadataGeneration)...)
	errs = append(errs, validateLabels(m.Labels, pathMetadataLabels)...)
	errs = append(errs, validateAnnotations(m.Annotations, pathMetadataAnnotations)...)
	errs = append(errs, apimachineryvalidation.ValidateOwnerReferences(m.OwnerReferences, pathMetadataOwnerReferences)...)
	errs = append(errs, apimachineryvalidation.ValidateFinalizers(m.Finalizers, pathMetadataFinalizers)...)
	errs = append(errs, metav1validation.ValidateManagedFields(m.ManagedFields, pathMetadataManagedFields)...)
	return errs
}

func validateNamespaceField(ns string, namespaced bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case namespaced && ns == "":
		errs = append(errs, field.Required(fld, ""))
	case namespaced:
		for _, msg := range validateNamespaceName(ns, false) {
			errs = append(errs, field.Invalid(fld, ns, msg))
		}
	case ns != "":
		errs = append(errs, field.Forbidden(fld, "not allowed on this type"))
	}
	return errs
}

// validateLabels is metav1validation.ValidateLabels in sorted key order.
func validateLabels(labels map[string]string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		errs = append(errs, metav1validation.ValidateLabels(map[string]string{k: labels[k]}, fld)...)
	}
	return errs
}

// validateAnnotations is apimachinery's ValidateAnnotations in sorted key order.
func validateAnnotations(annotations map[string]string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(annotations) {
		one := map[string]string{k: ""}
		errs = append(errs, apimachineryvalidation.ValidateAnnotations(one, fld)...)
	}
	if err := apimachineryvalidation.ValidateAnnotationsSize(annotations); err != nil {
		errs = append(errs, field.TooLong(fld, "", apimachineryvalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

func validateDNS1123Label(value string, fld *field.Path) field.ErrorList {
	return invalid(fld, value, validation.IsDNS1123Label(value))
}

func validateDNS1123Subdomain(value string, fld *field.Path) field.ErrorList {
	return invalid(fld, value, validation.IsDNS1123Subdomain(value))
}

func validateQualifiedName(value string, fld *field.Path) field.ErrorList {
	return invalid(fld, value, validation.IsQualifiedName(value))
}

func validatePortNum(port int32, fld *field.Path) field.ErrorList {
	return invalid(fld, port, validation.IsValidPortNum(int(port)))
}

// invalid turns a validator's messages about value into field errors, as the
// apiserver reports them.
func invalid(fld *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fld, value, msg))
	}
	return errs
}

// validateProtocol checks a port protocol that defaulting has already filled in.
func validateProtocol(p string, fld *field.Path) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(fld, "")}
	case !supportedPortProtocols.Has(p):
		return field.ErrorList{field.NotSupported(fld, p, sets.List(supportedPortProtocols))}
	}
	return nil
}

// validateLegacyIP is the apiserver's IsValidIPForLegacyField with strict
// validation (StrictIPCIDRValidation is on by default in v1.36).
func validateLegacyIP(value string, fld *field.Path) field.ErrorList {
	return validation.IsValidIPForLegacyField(fld, value, true, nil)
}

// validateLegacyCIDR is IsValidCIDRForLegacyField with strict validation.
func validateLegacyCIDR(value string, fld *field.Path) field.ErrorList {
	return validation.IsValidCIDRForLegacyField(fld, value, true, nil)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// toError turns a non-empty ErrorList into the apiserver's aggregate, nil otherwise.
func toError(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return errs.ToAggregate()
}

//lint:file-ignore SA1019 legacy v1 Endpoints are validated as the apiserver validates them

package controlplane

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// nameRules are the apiserver's name rule and scope of every kind the control
// plane takes.
var nameRules = map[string]struct {
	name       apimachineryvalidation.ValidateNameFunc
	namespaced bool
}{
	kindService:       {validateServiceName, true},
	kindPod:           {validateSubdomainName, true},
	kindEndpoints:     {validateSubdomainName, true},
	kindEndpointSlice: {validateSubdomainName, true},
	kindNode:          {validateSubdomainName, false},
	kindNamespace:     {validateNamespaceName, false},
	kindIPAddressPool: {validateSubdomainName, false},
}

// Namespaced reports whether objects of kind live in a namespace; ok is false
// for a kind the control plane does not take.
func Namespaced(kind string) (namespaced, ok bool) {
	r, ok := nameRules[kind]
	return r.namespaced, ok
}

// ValidateName checks the name and namespace of an object of kind by the rules
// the apiserver applies on create (DNS-1123 label or subdomain as the kind
// requires, with their length limits; a namespace for namespaced kinds and none
// for cluster-scoped ones). It is the check every caller makes before a name
// the user gave becomes part of a file name, a path or a kernel object's name:
// a name it accepts holds only [a-z0-9.-], has no "..", "/" or NUL, and is at
// most 253 bytes (63 for a namespace).
func ValidateName(kind, namespace, name string) error {
	r, ok := nameRules[kind]
	if !ok {
		return fmt.Errorf("%s %s: %w", kind, qualifiedName(namespace, name), ErrUnknownKind)
	}
	m := &metav1.ObjectMeta{Name: name, Namespace: namespace}
	var errs field.ErrorList
	fld := pathMetadata
	if name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	}
	for _, msg := range r.name(name, false) {
		if name != "" {
			errs = append(errs, field.Invalid(fld.Child("name"), name, msg))
		}
	}
	errs = append(errs, validateNamespaceField(m.Namespace, r.namespaced, fld.Child("namespace"))...)
	if len(errs) > 0 {
		return &ObjectError{Kind: kind, Namespace: namespace, Name: name, Err: toError(errs)}
	}
	return nil
}

// Validate runs on a defaulted copy of o.Obj the validation the control plane
// runs when it loads the object (the apiserver's create validation of its
// kind), so that a caller can refuse an object before it acts on it: before it
// writes a file, makes a namespace or starts a process for it. A namespaced
// object without a namespace gets "default", as kubectl gives it. The error is
// an *ObjectError that names o.Origin. Validate knows nothing of other
// objects: what depends on them (a ClusterIP already taken, overlapping pools)
// is found when the whole cluster is loaded.
func Validate(o Object) error {
	kind, m, ok := classify(o.Obj, false)
	if !ok {
		return &ObjectError{Origin: o.Origin, Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(), Err: ErrUnknownKind}
	}
	var errs field.ErrorList
	switch obj := m.(type) {
	case *corev1.Service:
		prepareServiceForCreate(obj)
		errs = validateServiceCreate(obj)
	case *corev1.Pod:
		preparePod(obj)
		errs = validatePod(obj)
	case *corev1.Node:
		prepareNode(obj)
		errs = validateNode(obj)
	case *corev1.Namespace:
		prepareNamespace(obj)
		errs = validateNamespace(obj)
	case *corev1.Endpoints:
		prepareEndpoints(obj)
		errs = validateEndpoints(obj)
	case *discoveryv1.EndpointSlice:
		prepareSlice(obj)
		errs = validateSlice(obj)
	case *pool.IPAddressPool:
		preparePool(obj)
		if err := validatePool(obj); err != nil {
			return &ObjectError{Origin: o.Origin, Kind: kind, Name: obj.Name, Err: err}
		}
	}
	if len(errs) > 0 {
		return &ObjectError{Origin: o.Origin, Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(), Err: toError(errs)}
	}
	return nil
}

// preparePool is what the apiserver does to a cluster-scoped custom resource
// before create: its type set, any metadata.namespace cleared.
func preparePool(p *pool.IPAddressPool) {
	p.TypeMeta = metav1.TypeMeta{APIVersion: pool.SchemeGroupVersion.String(), Kind: pool.Kind}
	p.Namespace = ""
}

// validatePool checks a pool's metadata as the apiserver checks a custom
// resource's (a DNS-1123 subdomain name, cluster-scoped), then its spec.
func validatePool(p *pool.IPAddressPool) error {
	if errs := validateObjectMeta(&p.ObjectMeta, false, validateSubdomainName); len(errs) > 0 {
		return toError(errs)
	}
	_, err := pool.Parse(p)
	return err
}

func qualifiedName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

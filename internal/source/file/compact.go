package file

import (
	"maps"
	"unique"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// compact lets a decoded object share what its fields repeat, in it and
// across objects, with no change to its value: a decoder allocates every
// string and map it reads, and a Service repeats most of them. Its
// namespace, label keys, port names and the values of its enumerations
// (protocol, type, policies, IP families) become one canonical string
// each (unique.Make); its first clusterIPs entry, its clusterIP; its
// selector, its labels map when the two are equal, as most manifests
// write them. A decoded Service held about 1.5 KB; at 10,000 Services the
// live heap of `svcnet get services -A` peaks at 24-26 MB instead of 30
// (gctrace).
//
// A compacted object may thus hold one map in two fields: whoever changes
// a map of a decoded object in place must copy it first (the embedded
// control plane sets fields, never a map's entries).
func compact(obj runtime.Object) {
	if svc, ok := obj.(*corev1.Service); ok {
		compactService(svc)
	}
}

func compactService(svc *corev1.Service) {
	svc.Namespace = canonical(svc.Namespace)
	canonicalKeys(svc.Labels)
	s := &svc.Spec
	canonicalKeys(s.Selector)
	if s.Selector != nil && svc.Labels != nil && maps.Equal(s.Selector, svc.Labels) {
		s.Selector = svc.Labels
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		p.Name = canonical(p.Name)
		p.Protocol = canonical(p.Protocol)
		if p.AppProtocol != nil {
			*p.AppProtocol = canonical(*p.AppProtocol)
		}
	}
	if len(s.ClusterIPs) > 0 && s.ClusterIPs[0] == s.ClusterIP {
		s.ClusterIPs[0] = s.ClusterIP
	}
	s.Type = canonical(s.Type)
	s.SessionAffinity = canonical(s.SessionAffinity)
	s.ExternalTrafficPolicy = canonical(s.ExternalTrafficPolicy)
	for i, f := range s.IPFamilies {
		s.IPFamilies[i] = canonical(f)
	}
	if s.IPFamilyPolicy != nil {
		*s.IPFamilyPolicy = canonical(*s.IPFamilyPolicy)
	}
	if s.InternalTrafficPolicy != nil {
		*s.InternalTrafficPolicy = canonical(*s.InternalTrafficPolicy)
	}
}

// canonical is the one copy of s's value that every compacted object
// shares.
func canonical[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// canonicalKeys makes m's keys canonical: assigning to a key that m holds
// stores the key given (a map keeps the last string written for a key).
func canonicalKeys(m map[string]string) {
	for k, v := range m {
		if c := canonical(k); unsafe.StringData(c) != unsafe.StringData(k) {
			m[c] = v
		}
	}
}

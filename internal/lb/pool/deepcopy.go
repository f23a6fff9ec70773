package pool

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeepCopyInto copies p into out; out shares nothing with p afterwards.
func (p *IPAddressPool) DeepCopyInto(out *IPAddressPool) {
	*out = *p
	out.TypeMeta = p.TypeMeta
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Spec.DeepCopyInto(&out.Spec)
	out.Status = p.Status.DeepCopy()
}

// DeepCopy returns a copy of p that shares nothing with it (nil for nil).
func (p *IPAddressPool) DeepCopy() *IPAddressPool {
	if p == nil {
		return nil
	}
	out := new(IPAddressPool)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *IPAddressPool) DeepCopyObject() runtime.Object {
	if c := p.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies l into out; out shares nothing with l afterwards.
func (l *IPAddressPoolList) DeepCopyInto(out *IPAddressPoolList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]IPAddressPool, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l that shares nothing with it (nil for nil).
func (l *IPAddressPoolList) DeepCopy() *IPAddressPoolList {
	if l == nil {
		return nil
	}
	out := new(IPAddressPoolList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *IPAddressPoolList) DeepCopyObject() runtime.Object {
	if c := l.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies s into out; out shares nothing with s afterwards.
func (s *IPAddressPoolSpec) DeepCopyInto(out *IPAddressPoolSpec) {
	*out = *s
	if s.Addresses != nil {
		out.Addresses = append([]string(nil), s.Addresses...)
	}
	if s.AutoAssign != nil {
		v := *s.AutoAssign
		out.AutoAssign = &v
	}
	if s.ServiceAllocation != nil {
		out.ServiceAllocation = s.ServiceAllocation.DeepCopy()
	}
}

// DeepCopy returns a copy of s that shares nothing with it (nil for nil).
func (s *IPAddressPoolSpec) DeepCopy() *IPAddressPoolSpec {
	if s == nil {
		return nil
	}
	out := new(IPAddressPoolSpec)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies a into out; out shares nothing with a afterwards.
func (a *ServiceAllocation) DeepCopyInto(out *ServiceAllocation) {
	*out = *a
	if a.Namespaces != nil {
		out.Namespaces = append([]string(nil), a.Namespaces...)
	}
	out.NamespaceSelectors = copySelectors(a.NamespaceSelectors)
	out.ServiceSelectors = copySelectors(a.ServiceSelectors)
}

// DeepCopy returns a copy of a that shares nothing with it (nil for nil).
func (a *ServiceAllocation) DeepCopy() *ServiceAllocation {
	if a == nil {
		return nil
	}
	out := new(ServiceAllocation)
	a.DeepCopyInto(out)
	return out
}

func copySelectors(in []metav1.LabelSelector) []metav1.LabelSelector {
	if in == nil {
		return nil
	}
	out := make([]metav1.LabelSelector, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// DeepCopy returns a copy of s that shares nothing with it (nil for nil).
func (s *IPAddressPoolStatus) DeepCopy() *IPAddressPoolStatus {
	if s == nil {
		return nil
	}
	out := &IPAddressPoolStatus{}
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	return out
}

package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// slimMeta is the object metadata the informer caches keep of each object:
// namespace, name and resourceVersion, which is all that client-go (keys,
// resync detection) and the handlers read. It implements metav1.Object so
// that meta.Accessor takes it without allocating; a full metav1.ObjectMeta
// would be five times its size, twice per Service.
//
// Contract: the getters of every other field return the zero value, and their
// setters do nothing (a transform drops those fields, as client-go's
// TransformStripManagedFields drops managedFields). Cached objects are never
// modified (client-go's informer contract), so no setter is expected to run.
type slimMeta struct {
	namespace, name, resourceVersion string
}

var _ metav1.Object = (*slimMeta)(nil)

func metaOf(o metav1.Object) slimMeta {
	return slimMeta{namespace: o.GetNamespace(), name: o.GetName(), resourceVersion: o.GetResourceVersion()}
}

func (m *slimMeta) GetNamespace() string          { return m.namespace }
func (m *slimMeta) SetNamespace(namespace string) { m.namespace = namespace }
func (m *slimMeta) GetName() string               { return m.name }
func (m *slimMeta) SetName(name string)           { m.name = name }
func (m *slimMeta) GetResourceVersion() string    { return m.resourceVersion }
func (m *slimMeta) SetResourceVersion(v string)   { m.resourceVersion = v }

// The fields below are not kept.

func (m *slimMeta) GetGenerateName() string                                    { return "" }
func (m *slimMeta) SetGenerateName(string)                                     {}
func (m *slimMeta) GetUID() types.UID                                          { return "" }
func (m *slimMeta) SetUID(types.UID)                                           {}
func (m *slimMeta) GetGeneration() int64                                       { return 0 }
func (m *slimMeta) SetGeneration(int64)                                        {}
func (m *slimMeta) GetSelfLink() string                                        { return "" }
func (m *slimMeta) SetSelfLink(string)                                         {}
func (m *slimMeta) GetCreationTimestamp() metav1.Time                          { return metav1.Time{} }
func (m *slimMeta) SetCreationTimestamp(metav1.Time)                           {}
func (m *slimMeta) GetDeletionTimestamp() *metav1.Time                         { return nil }
func (m *slimMeta) SetDeletionTimestamp(*metav1.Time)                          {}
func (m *slimMeta) GetDeletionGracePeriodSeconds() *int64                      { return nil }
func (m *slimMeta) SetDeletionGracePeriodSeconds(*int64)                       {}
func (m *slimMeta) GetLabels() map[string]string                               { return nil }
func (m *slimMeta) SetLabels(map[string]string)                                {}
func (m *slimMeta) GetAnnotations() map[string]string                          { return nil }
func (m *slimMeta) SetAnnotations(map[string]string)                           {}
func (m *slimMeta) GetFinalizers() []string                                    { return nil }
func (m *slimMeta) SetFinalizers([]string)                                     {}
func (m *slimMeta) GetOwnerReferences() []metav1.OwnerReference                { return nil }
func (m *slimMeta) SetOwnerReferences([]metav1.OwnerReference)                 {}
func (m *slimMeta) GetManagedFields() []metav1.ManagedFieldsEntry              { return nil }
func (m *slimMeta) SetManagedFields(managedFields []metav1.ManagedFieldsEntry) {}

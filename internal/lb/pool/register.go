package pool

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is svcnet.io/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// AddToScheme registers IPAddressPool and IPAddressPoolList (and the meta types a
// group version needs, such as ListOptions) in s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &IPAddressPool{}, &IPAddressPoolList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

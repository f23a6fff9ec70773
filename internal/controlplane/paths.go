package controlplane

import "k8s.io/apimachinery/pkg/util/validation/field"

// The field paths validation starts from, built once: a field.Path is
// immutable (Child, Index and Key return new ones), and built on every
// call they were the largest garbage of a reconcile, 15 MB of the 83 MB
// `svcnet get services -A` allocated for 10,000 Services.
var (
	pathMetadata                  = field.NewPath("metadata")
	pathMetadataNamespace         = pathMetadata.Child("namespace")
	pathMetadataGeneration        = pathMetadata.Child("generation")
	pathMetadataLabels            = pathMetadata.Child("labels")
	pathMetadataAnnotations       = pathMetadata.Child("annotations")
	pathMetadataOwnerReferences   = pathMetadata.Child("ownerReferences")
	pathMetadataFinalizers        = pathMetadata.Child("finalizers")
	pathMetadataManagedFields     = pathMetadata.Child("managedFields")
	pathSpec                      = field.NewPath("spec")
	pathSpecPorts                 = pathSpec.Child("ports")
	pathSpecIPFamilyPolicy        = pathSpec.Child("ipFamilyPolicy")
	pathSpecIPFamilies            = pathSpec.Child("ipFamilies")
	pathSpecClusterIPs            = pathSpec.Child("clusterIPs")
	pathSpecLoadBalancerClass     = pathSpec.Child("loadBalancerClass")
	pathSpecInternalTrafficPolicy = pathSpec.Child("internalTrafficPolicy")
)

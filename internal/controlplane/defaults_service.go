package controlplane

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	typeService   = metav1.TypeMeta{APIVersion: "v1", Kind: kindService}
	typePod       = metav1.TypeMeta{APIVersion: "v1", Kind: kindPod}
	typeNode      = metav1.TypeMeta{APIVersion: "v1", Kind: kindNode}
	typeNamespace = metav1.TypeMeta{APIVersion: "v1", Kind: kindNamespace}
	typeSlice     = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: kindEndpointSlice}
)

// prepareServiceForCreate does to a decoded Service what the apiserver does before
// validation: v1 defaulting (SetDefaults_Service), PrepareForCreate (status
// cleared) and normalizeClusterIPs (a lone clusterIP fills clusterIPs).
func prepareServiceForCreate(svc *corev1.Service) {
	svc.TypeMeta = typeService
	svc.Status = corev1.ServiceStatus{}
	defaultService(svc)
	if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	// An empty selector does not survive the apiserver's storage round trip (a map
	// with no entries is not encoded), so the Service is selector-less.
	if len(svc.Spec.Selector) == 0 {
		svc.Spec.Selector = nil
	}
}

// defaultService is pkg/apis/core/v1 SetDefaults_Service.
func defaultService(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		c := spec.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			timeout := corev1.DefaultClientIPServiceAffinitySeconds
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout},
			}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		sp := &spec.Ports[i]
		if sp.Protocol == "" {
			sp.Protocol = corev1.ProtocolTCP
		}
		if sp.TargetPort == intstr.FromInt32(0) || sp.TargetPort == intstr.FromString("") {
			sp.TargetPort = intstr.FromInt32(sp.Port)
		}
	}
	if externallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil && needsClusterIP(svc) {
		p := corev1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &p
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		t := true
		spec.AllocateLoadBalancerNodePorts = &t
	}
}

// externallyAccessible is pkg/api/v1/service ExternallyAccessible.
func externallyAccessible(svc *corev1.Service) bool {
	t := svc.Spec.Type
	return t == corev1.ServiceTypeLoadBalancer || t == corev1.ServiceTypeNodePort ||
		(t == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

// needsClusterIP is true for the types that get a ClusterIP (or are headless).
func needsClusterIP(svc *corev1.Service) bool {
	t := svc.Spec.Type
	return t == corev1.ServiceTypeClusterIP || t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer
}

// needsHealthCheck is NeedsHealthCheck: a LoadBalancer with externalTrafficPolicy Local.
func needsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// shouldAllocateNodePorts: NodePort always, LoadBalancer unless
// allocateLoadBalancerNodePorts is false.
func shouldAllocateNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		a := svc.Spec.AllocateLoadBalancerNodePorts
		return a == nil || *a
	}
	return false
}

// isHeadless is true for clusterIPs: [None].
func isHeadless(svc *corev1.Service) bool {
	ips := svc.Spec.ClusterIPs
	return len(ips) == 1 && ips[0] == corev1.ClusterIPNone
}

// Identity of the Service the control plane itself maintains.
const (
	kubernetesNamespace = metav1.NamespaceDefault
	kubernetesName      = "kubernetes"
	kubernetesPort      = 443
	kubernetesTarget    = 6443
)

// kubernetesService is the Service default/kubernetes as the apiserver's
// kubernetesservice controller creates it: ClusterIP ip, port https 443 -> 6443,
// no selector, SingleStack. It goes through the same defaulting as any Service.
func kubernetesService(ip string) *corev1.Service {
	single := corev1.IPFamilyPolicySingleStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      kubernetesName,
			Namespace: kubernetesNamespace,
			Labels:    map[string]string{"component": "apiserver", "provider": "kubernetes"},
		},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{
				Name: "https", Protocol: corev1.ProtocolTCP, Port: kubernetesPort,
				TargetPort: intstr.FromInt32(kubernetesTarget),
			}},
			ClusterIP:       ip,
			IPFamilyPolicy:  &single,
			SessionAffinity: corev1.ServiceAffinityNone,
			Type:            corev1.ServiceTypeClusterIP,
		},
	}
	prepareServiceForCreate(svc)
	return svc
}

package model

import (
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// ServiceKey names a Service (and everything keyed by it) as namespace/name.
type ServiceKey struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (k ServiceKey) String() string { return k.Namespace + "/" + k.Name }

// ServiceType is spec.type.
type ServiceType string

const (
	ServiceTypeClusterIP    ServiceType = "ClusterIP"
	ServiceTypeNodePort     ServiceType = "NodePort"
	ServiceTypeLoadBalancer ServiceType = "LoadBalancer"
	ServiceTypeExternalName ServiceType = "ExternalName"
)

// Protocol is an L4 protocol of a port.
type Protocol string

const (
	ProtocolTCP  Protocol = "TCP"
	ProtocolUDP  Protocol = "UDP"
	ProtocolSCTP Protocol = "SCTP"
)

// TrafficPolicy is externalTrafficPolicy or internalTrafficPolicy.
type TrafficPolicy string

const (
	TrafficPolicyCluster TrafficPolicy = "Cluster"
	TrafficPolicyLocal   TrafficPolicy = "Local"
)

// IPMode is status.loadBalancer.ingress[].ipMode.
type IPMode string

const (
	IPModeVIP   IPMode = "VIP"
	IPModeProxy IPMode = "Proxy"
)

// Well-known labels the sources honour.
const (
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelHeadless         = "service.kubernetes.io/headless"
	LabelServiceName      = "kubernetes.io/service-name"
	LabelTopologyZone     = "topology.kubernetes.io/zone"
)

// SchedulerAnnotation on a Service chooses how svcnet's eBPF data plane picks
// an endpoint per connect: "random", "rr" (round robin), "sh" (source
// hash), "lc" (least connection) or "maglev" (connections from outside the
// node by Maglev consistent hashing of the flow; connects on the node at
// random); unset, the plane's --ebpf-scheduler. Other planes ignore it.
const SchedulerAnnotation = "svcnet.io/scheduler"

// DefaultAffinityTimeout is the ClientIP affinity timeout when none is given (3 hours).
const DefaultAffinityTimeout = 10800 * time.Second

// Service is the slim form of a v1 Service.
type Service struct {
	Namespace string
	Name      string
	// UID is the object's metadata.uid, which events about it name.
	UID  string
	Type ServiceType

	// ClusterIPs are the allocated cluster IPs, primary family first; empty for
	// headless and ExternalName Services.
	ClusterIPs []netip.Addr
	// Headless is set for clusterIP: None (and for Services labelled
	// service.kubernetes.io/headless).
	Headless   bool
	IPFamilies []ipfamily.Family
	Ports      []ServicePort

	ExternalIPs              []netip.Addr
	LoadBalancerIngress      []LoadBalancerIngress
	LoadBalancerSourceRanges []netip.Prefix
	LoadBalancerClass        string
	// AllocateLoadBalancerNodePorts is spec.allocateLoadBalancerNodePorts (true when unset).
	AllocateLoadBalancerNodePorts bool

	ExternalTrafficPolicy TrafficPolicy // "" unless NodePort or LoadBalancer
	InternalTrafficPolicy TrafficPolicy
	HealthCheckNodePort   int32

	// AffinityClientIP is sessionAffinity: ClientIP; AffinityTimeout its timeout.
	AffinityClientIP bool
	AffinityTimeout  time.Duration

	TrafficDistribution string
	ExternalName        string
	// PublishNotReadyAddresses is spec.publishNotReadyAddresses (DNS uses it).
	PublishNotReadyAddresses bool

	Selector    map[string]string
	Labels      map[string]string
	Annotations map[string]string
}

// Key returns the Service's namespace/name.
func (s *Service) Key() ServiceKey { return ServiceKey{s.Namespace, s.Name} }

// ServicePort is one entry of spec.ports.
type ServicePort struct {
	Name     string
	Protocol Protocol
	Port     int32
	// TargetPort is the numeric target port, or 0 when TargetPortName is set.
	TargetPort     int32
	TargetPortName string
	NodePort       int32
	AppProtocol    string
}

// LoadBalancerIngress is one entry of status.loadBalancer.ingress.
type LoadBalancerIngress struct {
	IP       netip.Addr // invalid when only Hostname is set
	Hostname string
	IPMode   IPMode // IPModeVIP when unset
}

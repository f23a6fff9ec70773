// Package controlplane does, purely and deterministically, what kube-apiserver and
// kube-controller-manager do for Services when there is no cluster: it validates and
// defaults manifests as the apiserver would, allocates ClusterIPs, NodePorts and
// healthCheckNodePorts, builds EndpointSlices from Pods (and mirrors legacy Endpoints),
// and keeps every allocation stable across runs through a persisted State.
//
// It imports no kernel or I/O package: input is a list of decoded objects and the
// previous State; output is the objects as the API would hold them, the errors of
// the objects that were left out, and the State to persist.
package controlplane

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// Config is the control plane's cluster configuration.
type Config struct {
	// ServiceCIDRs is --service-cluster-ip-range: one CIDR, or two of different
	// families for dual-stack (primary first). Default 10.96.0.0/12.
	ServiceCIDRs []netip.Prefix
	// NodePortRange is --service-node-port-range. Default 30000-32767.
	NodePortRange PortRange
}

// PortRange is an inclusive range of ports.
type PortRange struct{ First, Last int32 }

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Object is one decoded manifest object and where it came from.
type Object struct {
	// Origin names the file (and document) the object came from, e.g. "svc.yaml" or
	// "dir/svc.yaml#2"; it starts every error about the object.
	Origin string
	// Obj is a typed object: *corev1.Service, *corev1.Pod, *corev1.Node,
	// *corev1.Namespace, *corev1.Endpoints or *discoveryv1.EndpointSlice.
	Obj runtime.Object
}

// State is what must persist between runs for allocations to be stable. It is
// serialised as JSON by the file source.
type State struct {
	// Services maps "namespace/name" to what was allocated for it.
	Services map[string]ServiceAlloc `json:"services,omitempty"`
	// Created maps "Kind/namespace/name" ("Kind/name" when cluster-scoped) of every
	// other object to when it was first seen, so its AGE survives reloads.
	Created map[string]time.Time `json:"created,omitempty"`
	// Pools maps the name of every IPAddressPool admitted so far to the
	// addresses it was admitted with ("first-last" ranges, in spec order). A
	// pool whose addresses still match is established: it is checked before
	// the pools applied after it, so a newer conflicting pool, or an edit that
	// conflicts, is the one refused. A refused pool keeps its previous record;
	// a pool no longer given loses it.
	Pools map[string][]string `json:"pools,omitempty"`
}

// ServiceAlloc is one Service's allocations.
type ServiceAlloc struct {
	UID        string    `json:"uid"`
	Created    time.Time `json:"created"`
	ClusterIPs []string  `json:"clusterIPs,omitempty"`
	// NodePorts maps "PROTOCOL/port" (e.g. "TCP/80") to the node port.
	NodePorts           map[string]int32 `json:"nodePorts,omitempty"`
	HealthCheckNodePort int32            `json:"healthCheckNodePort,omitempty"`
	// LoadBalancerIPs are the IPs svcnet lb gave it from a pool of addresses.
	LoadBalancerIPs []string `json:"loadBalancerIPs,omitempty"`
}

// ObjectError is why one object was left out. Error() reads like
// "svc.yaml: Service default/web: spec.ports[1].port: Invalid value: 70000: must be
// between 1 and 65535, inclusive".
type ObjectError struct {
	Origin    string
	Kind      string
	Namespace string // empty for cluster-scoped objects
	Name      string
	Err       error // a field.ErrorList's aggregate, or another error naming the field
}

func (e *ObjectError) Error() string {
	id := e.Name
	if e.Namespace != "" {
		id = e.Namespace + "/" + e.Name
	}
	if e.Origin == "" {
		return fmt.Sprintf("%s %s: %v", e.Kind, id, e.Err)
	}
	return fmt.Sprintf("%s: %s %s: %v", e.Origin, e.Kind, id, e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// Equal reports whether s and o hold the same allocations, creation times
// and pools (a nil and an empty list or map are the same: neither is
// persisted).
func (s State) Equal(o State) bool {
	return maps.EqualFunc(s.Services, o.Services, ServiceAlloc.equal) &&
		maps.EqualFunc(s.Created, o.Created, time.Time.Equal) &&
		maps.EqualFunc(s.Pools, o.Pools, slices.Equal)
}

func (a ServiceAlloc) equal(b ServiceAlloc) bool {
	return a.UID == b.UID && a.Created.Equal(b.Created) && slices.Equal(a.ClusterIPs, b.ClusterIPs) &&
		maps.Equal(a.NodePorts, b.NodePorts) && a.HealthCheckNodePort == b.HealthCheckNodePort &&
		slices.Equal(a.LoadBalancerIPs, b.LoadBalancerIPs)
}

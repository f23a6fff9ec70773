// Package pool is svcnet lb's IPAddressPool kind (svcnet.io/v1alpha1, cluster-scoped):
// its Go types (a runtime.Object with hand-written deep copies), its registration in
// a runtime.Scheme, and Parse, which validates a pool and converts it to the pure
// allocator's alloc.Pool. deploy/lb/crd.yaml is its CustomResourceDefinition; the
// two must describe the same fields (a test checks it).
package pool

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kind's API coordinates.
const (
	Group    = "svcnet.io"
	Version  = "v1alpha1"
	Kind     = "IPAddressPool"
	Resource = "ipaddresspools"
)

// IPAddressPool is a set of addresses svcnet lb may give LoadBalancer Services.
type IPAddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              IPAddressPoolSpec `json:"spec"`
	// Status is what svcnet lb controller made of the pool (kube mode).
	Status *IPAddressPoolStatus `json:"status,omitempty"`
}

// IPAddressPoolList is a list of IPAddressPools.
type IPAddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressPool `json:"items"`
}

// IPAddressPoolSpec is a pool's configuration.
type IPAddressPoolSpec struct {
	// Addresses are CIDRs ("172.26.236.180/30", "fd00::/120": every address of the
	// prefix, network and broadcast included, as MetalLB) and inclusive ranges
	// ("172.26.236.180-172.26.236.199"); none may overlap another. Empty in node-ip
	// mode, required in l2 mode.
	Addresses []string `json:"addresses"`
	// AutoAssign (default true): when false the pool serves only Services that ask
	// for it or one of its IPs.
	AutoAssign *bool `json:"autoAssign,omitempty"`
	// Mode is "l2" (default) or "node-ip".
	Mode string `json:"mode,omitempty"`
	// ServiceAllocation limits the pool to some Services and orders auto-assignment.
	ServiceAllocation *ServiceAllocation `json:"serviceAllocation,omitempty"`
}

// ServiceAllocation limits which Services a pool serves. Every non-empty list must
// admit a Service (within a list, any entry admits it); no list admits any Service.
type ServiceAllocation struct {
	// Priority orders pools eligible for auto-assignment: lower first; 0 (unset) is
	// the lowest priority, after every pool that sets one (as MetalLB).
	Priority int `json:"priority,omitempty"`
	// Namespaces the Service may be in.
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceSelectors select the Service's namespace by its labels.
	NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors,omitempty"`
	// ServiceSelectors select the Service by its labels.
	ServiceSelectors []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
}

// IPAddressPoolStatus is written by svcnet lb controller.
type IPAddressPoolStatus struct {
	// Conditions hold ConditionAccepted.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConditionAccepted is the pool's admission: True when the pool serves
// (reason ReasonAccepted, or ReasonReservedAddresses when some of its addresses
// became the cluster's own after it was admitted and are no longer handed
// out), False when it was refused (ReasonOverlap, ReasonReservedAddresses or
// ReasonInvalid; the message says why). observedGeneration is the generation
// it was decided for.
const ConditionAccepted = "Accepted"

// Reasons of ConditionAccepted.
const (
	ReasonAccepted          = "Accepted"
	ReasonOverlap           = "Overlap"
	ReasonReservedAddresses = "ReservedAddresses"
	ReasonInvalid           = "Invalid"
)

// StatusAdmitted reports whether p's status says its current generation was
// admitted: ConditionAccepted True with observedGeneration p.Generation.
func StatusAdmitted(p *IPAddressPool) bool {
	if p == nil || p.Status == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == ConditionAccepted {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation
		}
	}
	return false
}

package kube

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/model"
)

// world is the part of a model that must be equal between the embedded control plane
// and Kubernetes: everything but the concrete allocations (which need only be valid)
// and identities that are random in Kubernetes (UIDs, slice names).
type world struct {
	Services map[string]normService
	Nodes    map[string]model.Node
	Pods     map[string]model.Pod
}

type normService struct {
	Service model.Service
	// Slices: for each slice shape (address type, labels, ports), the union of its
	// endpoints. How Kubernetes spreads endpoints over slices of one shape depends on
	// the order events arrived in, so only the union and the bound of 100 endpoints a
	// slice (checked by sliceSizes) are compared.
	Slices map[string][]string
}

// allocations are the concrete values left out of a world, checked separately.
type allocations struct {
	ClusterIPs           map[string][]netip.Addr
	NodePorts            map[string][]int32
	HealthCheckNodePorts map[string]int32
}

func normalize(snap *model.Snapshot, skip func(model.ServiceKey) bool) (world, allocations) {
	w := world{Services: map[string]normService{}, Nodes: map[string]model.Node{}, Pods: map[string]model.Pod{}}
	a := allocations{ClusterIPs: map[string][]netip.Addr{}, NodePorts: map[string][]int32{}, HealthCheckNodePorts: map[string]int32{}}
	for _, st := range snap.Services() {
		key := st.Service.Key()
		if skip(key) {
			continue
		}
		s := *st.Service
		s.UID = "" // each control plane makes its own
		a.ClusterIPs[key.String()] = s.ClusterIPs
		a.HealthCheckNodePorts[key.String()] = s.HealthCheckNodePort
		s.ClusterIPs = nil
		if s.HealthCheckNodePort != 0 {
			s.HealthCheckNodePort = -1 // present; its value is an allocation
		}
		s.Ports = slices.Clone(s.Ports)
		for i := range s.Ports {
			a.NodePorts[key.String()] = append(a.NodePorts[key.String()], s.Ports[i].NodePort)
			if s.Ports[i].NodePort != 0 {
				s.Ports[i].NodePort = -1
			}
		}
		sls := renderSlices(st.Slices)
		w.Services[key.String()] = normService{Service: s, Slices: sls}
	}
	for _, n := range snap.Nodes() {
		nn := *n
		nn.TaintKeys = slices.DeleteFunc(slices.Clone(nn.TaintKeys), lifecycleTaint)
		if len(nn.TaintKeys) == 0 {
			nn.TaintKeys = nil
		}
		w.Nodes[n.Name] = nn
	}
	for _, p := range snap.Pods() {
		w.Pods[p.Key().String()] = *p
	}
	return w, a
}

// lifecycleTaint reports the taints that Kubernetes' node lifecycle puts on
// and takes off Nodes by their conditions: the apiserver's admission
// (TaintNodesByCondition) adds not-ready to every new Node, and only the
// node lifecycle controller, which the parity test does not run, removes
// it. The embedded control plane keeps a manifest's taints as written.
func lifecycleTaint(key string) bool {
	return key == "node.kubernetes.io/not-ready" || key == "node.kubernetes.io/unreachable"
}

// renderSlices groups slices by shape and renders each endpoint, UIDs dropped.
func renderSlices(sls []*model.EndpointSlice) map[string][]string {
	out := map[string][]string{}
	for _, sl := range sls {
		// The model keeps no slice labels (nothing reads them; the
		// Service a slice belongs to is its key).
		shape := fmt.Sprintf("%s headless=%v ports=%v", sl.AddressType, sl.Headless, sl.Ports)
		eps := out[shape]
		for _, e := range sl.Endpoints {
			ref := ""
			if e.TargetRef != nil {
				ref = e.TargetRef.Kind + "/" + e.TargetRef.Namespace + "/" + e.TargetRef.Name
			}
			eps = append(eps, fmt.Sprintf("%v ready=%v serving=%v terminating=%v host=%q node=%q zone=%q hints=%v/%v ref=%s",
				e.Addresses, e.Ready, e.Serving, e.Terminating, e.Hostname, e.NodeName, e.Zone, e.HintZones, e.HintNodes, ref))
		}
		slices.Sort(eps)
		out[shape] = eps
	}
	return out
}

// sliceSizes returns, for every Service, its slices' endpoint counts, sorted.
func sliceSizes(snap *model.Snapshot) map[string][]int {
	out := map[string][]int{}
	for _, st := range snap.Services() {
		for _, sl := range st.Slices {
			out[st.Service.Key().String()] = append(out[st.Service.Key().String()], len(sl.Endpoints))
		}
		slices.Sort(out[st.Service.Key().String()])
	}
	return out
}

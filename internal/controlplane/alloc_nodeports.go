package controlplane

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// claimNodePorts is the apiserver's initNodePorts for the requested node ports of a
// NodePort or LoadBalancer Service: the first nodePort requested for a port number
// serves every entry of that number (so TCP and UDP of one port may share it), an
// entry asking for a different one claims that too, and entries with no request
// for their port number are left in a.deferred for allocateNodePorts.
// Ports of a LoadBalancer with allocateLoadBalancerNodePorts false get a node port
// only when they ask for one.
func (al *allocator) claimNodePorts(a *svcAlloc) error {
	svc := a.svc
	if t := svc.Spec.Type; t != corev1.ServiceTypeNodePort && t != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	group := map[int32]int32{}
	ports := svc.Spec.Ports
	for i := range ports {
		sp := &ports[i]
		if sp.NodePort == 0 && !shouldAllocateNodePorts(svc) {
			continue
		}
		owner := a.nodePortOwner(sp.Port)
		switch allocated := group[sp.Port]; {
		case allocated == 0:
			np := findRequestedNodePort(sp.Port, ports)
			if np == 0 {
				a.deferred = append(a.deferred, i)
				continue
			}
			if err := al.claimPort(a, np, owner); err != nil {
				return nodePortError(i, np, err)
			}
			sp.NodePort, group[sp.Port] = np, np
		case sp.NodePort == 0:
			sp.NodePort = allocated
		case sp.NodePort != allocated:
			if err := al.claimPort(a, sp.NodePort, owner); err != nil {
				return nodePortError(i, sp.NodePort, err)
			}
		}
	}
	return nil
}

func nodePortError(i int, np int32, err error) error {
	fld := pathSpecPorts.Index(i).Child("nodePort")
	return toError(field.ErrorList{field.Invalid(fld, np, err.Error())})
}

// findRequestedNodePort returns the nodePort of the first entry of port number
// port that has one, 0 if none.
func findRequestedNodePort(port int32, ports []corev1.ServicePort) int32 {
	for _, sp := range ports {
		if sp.Port == port && sp.NodePort != 0 {
			return sp.NodePort
		}
	}
	return 0
}

// allocateNodePorts allocates a node port for each deferred port number, shared by
// the entries of that number.
func (al *allocator) allocateNodePorts(a *svcAlloc) error {
	group := map[int32]int32{}
	for _, i := range a.deferred {
		sp := &a.svc.Spec.Ports[i]
		if np := group[sp.Port]; np != 0 {
			sp.NodePort = np
			continue
		}
		owner := a.nodePortOwner(sp.Port)
		np, err := al.ports.next(a.key+"/"+nodePortKey(sp), owner)
		if err != nil {
			return fmt.Errorf("failed to allocate a nodePort: %w", err)
		}
		a.claims = append(a.claims, claim{port: np, owner: owner})
		sp.NodePort, group[sp.Port] = np, np
	}
	return nil
}

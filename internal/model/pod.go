package model

import "net/netip"

// PodKey names a Pod as namespace/name.
type PodKey = ServiceKey

// Pod is the slim form of a v1 Pod.
type Pod struct {
	Namespace string
	Name      string
	NodeName  string
	IPs       []netip.Addr
	Labels    map[string]string
	Ready     bool
	// Terminating is set once the Pod has a deletion timestamp.
	Terminating    bool
	Phase          string
	Hostname       string
	Subdomain      string
	HostNetwork    bool
	ContainerPorts []ContainerPort
}

// Key returns the Pod's namespace/name.
func (p *Pod) Key() PodKey { return PodKey{p.Namespace, p.Name} }

// ContainerPort is one declared port of one of the Pod's containers.
type ContainerPort struct {
	Container     string
	Name          string
	Protocol      Protocol
	ContainerPort int32
	HostPort      int32
	HostIP        string
}

package controlplane

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Controller names and limits of kube-controller-manager's EndpointSlice controllers.
const (
	controllerEndpointSlice          = "endpointslice-controller.k8s.io"
	controllerEndpointSliceMirroring = "endpointslicemirroring-controller.k8s.io"
	maxEndpointsPerSlice             = 100
)

// sliceNames hands out EndpointSlice names unique within a namespace.
type sliceNames struct {
	// taken holds the names given, as namespace/name.
	taken map[string]bool
	// bumped holds the namespaces where a name generated was taken, and
	// another was derived: there, which slice has which name depends on
	// the order they were made in.
	bumped map[string]bool
}

func newSliceNames() *sliceNames {
	return &sliceNames{taken: map[string]bool{}, bumped: map[string]bool{}}
}

// take reserves namespace/name.
func (n *sliceNames) take(ns, name string) { n.taken[ns+"/"+name] = true }

// generate returns generateName(base, parts...), re-derived with a counter until
// the name is free in namespace ns.
func (n *sliceNames) generate(ns, base string, parts ...string) string {
	for i := 0; ; i++ {
		name := generateName(base, append(parts, strconv.Itoa(i))...)
		if !n.taken[ns+"/"+name] {
			n.taken[ns+"/"+name] = true
			return name
		}
		n.bumped[ns] = true
	}
}

// slicePrefix is the controllers' getEndpointSlicePrefix: "<name>-", or the bare
// name when that would not be a valid prefix.
func slicePrefix(name string) string {
	if len(validateSubdomainName(name+"-", true)) != 0 {
		return name
	}
	return name + "-"
}

// sliceBuilder builds the endpointslice controller's slices for Services with a
// selector.
type sliceBuilder struct {
	names *sliceNames
	pods  podIndex
	nodes map[string]*corev1.Node
}

// portGroup is the endpoints of one address type that share one set of ports.
type portGroup struct {
	key   string
	ports []discoveryv1.EndpointPort
	eps   []discoveryv1.Endpoint
}

// forService returns the slices of svc, which has a selector and is not
// ExternalName: for each of its IP families, the selected Pods that are not
// terminal and have an IP of that family, grouped by resolved ports, sorted by Pod
// name and cut into slices of at most 100; a family with no endpoint gets the
// controller's empty placeholder slice.
func (b *sliceBuilder) forService(svc *corev1.Service) []*discoveryv1.EndpointSlice {
	pods := b.pods.selectPods(svc.Namespace, svc.Spec.Selector)
	var out []*discoveryv1.EndpointSlice
	for _, at := range addressTypes(svc) {
		groups := map[string]*portGroup{}
		for _, pod := range pods {
			if !shouldPodBeInEndpoints(pod) {
				continue
			}
			ports := endpointPorts(svc, pod)
			key := portsKey(ports)
			g := groups[key]
			if g == nil {
				g = &portGroup{key: key, ports: ports}
				groups[key] = g
			}
			if ep := b.podToEndpoint(pod, svc, at); len(ep.Addresses) > 0 {
				g.eps = append(g.eps, ep)
			}
		}
		n := len(out)
		for _, key := range sortedKeys(groups) {
			out = append(out, b.chunk(svc, at, groups[key])...)
		}
		if len(out) == n {
			ph := &portGroup{key: "placeholder", ports: []discoveryv1.EndpointPort{}}
			out = append(out, b.newSlice(svc, at, ph, ph.key))
		}
	}
	applyTrafficDistribution(svc, out)
	return out
}

// chunk cuts g into slices of at most maxEndpointsPerSlice, in Pod name order.
func (b *sliceBuilder) chunk(svc *corev1.Service, at discoveryv1.AddressType, g *portGroup) []*discoveryv1.EndpointSlice {
	sort.Slice(g.eps, func(i, j int) bool { return endpointLess(&g.eps[i], &g.eps[j]) })
	var out []*discoveryv1.EndpointSlice
	for c := 0; c*maxEndpointsPerSlice < len(g.eps); c++ {
		s := b.newSlice(svc, at, g, g.key, strconv.Itoa(c))
		s.Endpoints = append(s.Endpoints, g.eps[c*maxEndpointsPerSlice:min(len(g.eps), (c+1)*maxEndpointsPerSlice)]...)
		out = append(out, s)
	}
	return out
}

// newSlice is the controller's newEndpointSlice, named deterministically.
func (b *sliceBuilder) newSlice(svc *corev1.Service, at discoveryv1.AddressType, g *portGroup, parts ...string) *discoveryv1.EndpointSlice {
	prefix := slicePrefix(svc.Name)
	name := b.names.generate(svc.Namespace, prefix, append([]string{svc.Namespace, svc.Name, string(at)}, parts...)...)
	return &discoveryv1.EndpointSlice{
		TypeMeta: typeSlice,
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			GenerateName:    prefix,
			Namespace:       svc.Namespace,
			UID:             makeUID(kindEndpointSlice, svc.Namespace, name),
			Labels:          sliceLabels(svc),
			OwnerReferences: []metav1.OwnerReference{controllerRef(svc.Name, svc.UID, kindService)},
		},
		AddressType: at,
		Ports:       copyPorts(g.ports),
		Endpoints:   []discoveryv1.Endpoint{},
	}
}

func controllerRef(name string, uid types.UID, kind string) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: "v1", Kind: kind, Name: name, UID: uid, Controller: &t, BlockOwnerDeletion: &t}
}

// sliceLabels is setEndpointSliceLabels for a new slice: the Service's labels but
// the reserved ones, the headless label when the Service has no ClusterIP, the
// service name and the controller's name.
func sliceLabels(svc *corev1.Service) map[string]string {
	l := map[string]string{}
	for k, v := range svc.Labels {
		if k != discoveryv1.LabelServiceName && k != discoveryv1.LabelManagedBy && k != corev1.IsHeadlessService {
			l[k] = v
		}
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		l[corev1.IsHeadlessService] = ""
	}
	l[discoveryv1.LabelServiceName] = svc.Name
	l[discoveryv1.LabelManagedBy] = controllerEndpointSlice
	return l
}

// copyPorts deep-copies ports (never nil), so that no two slices share a pointer.
func copyPorts(ports []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, len(ports))
	for i := range ports {
		ports[i].DeepCopyInto(&out[i])
	}
	return out
}

// addressTypes are the slice address types of svc's IP families, in their order.
func addressTypes(svc *corev1.Service) []discoveryv1.AddressType {
	var out []discoveryv1.AddressType
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			out = append(out, discoveryv1.AddressTypeIPv4)
		case corev1.IPv6Protocol:
			out = append(out, discoveryv1.AddressTypeIPv6)
		}
	}
	return out
}

// shouldPodBeInEndpoints: not Succeeded or Failed, and has an IP. Terminating Pods
// are kept (with their conditions saying so).
func shouldPodBeInEndpoints(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return len(p.Status.PodIPs) > 0
}

func isPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podToEndpoint is the controller's podToEndpoint. A Pod whose Node is not known
// still gets an endpoint (nodeName from the Pod, no zone), where the controller
// would skip it until the Node appears.
func (b *sliceBuilder) podToEndpoint(pod *corev1.Pod, svc *corev1.Service, at discoveryv1.AddressType) discoveryv1.Endpoint {
	serving := isPodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses:  podAddresses(pod, at),
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &corev1.ObjectReference{Kind: kindPod, Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		name := pod.Spec.NodeName
		ep.NodeName = &name
	}
	if node := b.nodes[pod.Spec.NodeName]; node != nil && node.Labels[corev1.LabelTopologyZone] != "" {
		zone := node.Labels[corev1.LabelTopologyZone]
		ep.Zone = &zone
	}
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		h := pod.Spec.Hostname
		ep.Hostname = &h
	}
	return ep
}

// podAddresses are the Pod's IPs of the slice's family, in canonical form.
func podAddresses(pod *corev1.Pod, at discoveryv1.AddressType) []string {
	addrs := []string{}
	for _, pip := range pod.Status.PodIPs {
		ip, err := netip.ParseAddr(pip.IP)
		if err != nil {
			continue
		}
		if ip.Is4() == (at == discoveryv1.AddressTypeIPv4) {
			addrs = append(addrs, ip.String())
		}
	}
	return addrs
}

// endpointPorts is the controller's getEndpointPorts: each Service port resolved
// against the Pod; a named targetPort the Pod does not declare (for that
// protocol) leaves the port out for this Pod.
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	out := []discoveryv1.EndpointPort{}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, ok := findPort(pod, sp)
		if !ok {
			continue
		}
		name, proto := sp.Name, sp.Protocol
		out = append(out, discoveryv1.EndpointPort{Name: &name, Port: &num, Protocol: &proto, AppProtocol: sp.AppProtocol})
	}
	return out
}

// findPort is the controller's FindPort: a number is used as is; a name is looked
// up among the ports of the containers and of the sidecar (restartable init)
// containers with the Service port's protocol.
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	if sp.TargetPort.Type == intstr.Int {
		return sp.TargetPort.IntVal, true
	}
	name := sp.TargetPort.StrVal
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name && p.Protocol == sp.Protocol {
				return p.ContainerPort, true
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == name && p.Protocol == sp.Protocol {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// portsKey identifies a set of endpoint ports regardless of order.
func portsKey(ports []discoveryv1.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		app := ""
		if p.AppProtocol != nil {
			app = *p.AppProtocol
		}
		parts = append(parts, strings.Join([]string{*p.Name, string(*p.Protocol), strconv.Itoa(int(*p.Port)), app}, "/"))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// endpointLess orders endpoints by target (namespace, name), then first address.
func endpointLess(a, b *discoveryv1.Endpoint) bool {
	if an, bn := refName(a), refName(b); an != bn {
		return an < bn
	}
	return addrLess(a, b)
}

// addrLess orders endpoints by first address (as IPs), then target.
func addrLess(a, b *discoveryv1.Endpoint) bool {
	x, errX := netip.ParseAddr(firstAddr(a))
	y, errY := netip.ParseAddr(firstAddr(b))
	switch {
	case errX == nil && errY == nil && x != y:
		return x.Less(y)
	case firstAddr(a) != firstAddr(b):
		return firstAddr(a) < firstAddr(b)
	}
	return refName(a) < refName(b)
}

func refName(ep *discoveryv1.Endpoint) string {
	if ep.TargetRef == nil {
		return ""
	}
	return ep.TargetRef.Namespace + "/" + ep.TargetRef.Name
}

func firstAddr(ep *discoveryv1.Endpoint) string {
	if len(ep.Addresses) == 0 {
		return ""
	}
	return ep.Addresses[0]
}

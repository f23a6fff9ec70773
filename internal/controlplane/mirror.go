//lint:file-ignore SA1019 legacy v1 Endpoints are read and mirrored on purpose, as kube-controller-manager does

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
)

// Mirroring controller constants.
const (
	maxEndpointsPerSubset   = 1000 // --mirroring-max-endpoints-per-subset default
	annotationLeaderElect   = "control-plane.alpha.kubernetes.io/leader"
	annotationLastApplied   = corev1.LastAppliedConfigAnnotation
	annotationTriggerTimeEP = corev1.EndpointsLastChangeTriggerTime
)

// shouldMirror is the mirroring controller's filter: not labelled skip-mirror, not
// a leader-election lock.
func shouldMirror(ep *corev1.Endpoints) bool {
	_, leader := ep.Annotations[annotationLeaderElect]
	return ep.Labels[discoveryv1.LabelSkipMirror] != "true" && !leader
}

// mirror returns the slices the endpointslicemirroring controller makes of ep,
// whose Service exists and has no selector: its subsets repacked, each subset's
// first 1000 addresses (ready first) grouped by address type and ports, one slice
// per group. Endpoints carry only the ready condition, as upstream.
func (b *sliceBuilder) mirror(ep *corev1.Endpoints) []*discoveryv1.EndpointSlice {
	if !shouldMirror(ep) {
		return nil
	}
	groups := map[string]*portGroup{}
	seen := map[string]bool{}
	for _, ss := range repackSubsets(ep.Subsets) {
		ports := mirrorPorts(ss.Ports)
		pk := portsKey(ports)
		added := 0
		add := func(a corev1.EndpointAddress, ready bool) {
			if added >= maxEndpointsPerSubset {
				return
			}
			e, at, ok := addressToEndpoint(a, ready)
			if !ok {
				return
			}
			added++
			key := string(at) + "-" + pk
			g := groups[key]
			if g == nil {
				g = &portGroup{key: key, ports: ports}
				groups[key] = g
			}
			if id := key + "|" + endpointID(&e); !seen[id] {
				seen[id] = true
				g.eps = append(g.eps, e)
			}
		}
		for _, a := range ss.Addresses {
			add(a, true)
		}
		for _, a := range ss.NotReadyAddresses {
			add(a, false)
		}
	}
	var out []*discoveryv1.EndpointSlice
	for _, key := range sortedKeys(groups) {
		if g := groups[key]; len(g.eps) > maxEndpointsPerSubset {
			sort.Slice(g.eps, func(i, j int) bool { return addrLess(&g.eps[i], &g.eps[j]) })
			g.eps = g.eps[:maxEndpointsPerSubset]
		}
		out = append(out, b.mirrorSlice(ep, groups[key]))
	}
	return out
}

func (b *sliceBuilder) mirrorSlice(ep *corev1.Endpoints, g *portGroup) *discoveryv1.EndpointSlice {
	at := discoveryv1.AddressTypeIPv4
	if strings.HasPrefix(g.key, string(discoveryv1.AddressTypeIPv6)) {
		at = discoveryv1.AddressTypeIPv6
	}
	prefix := slicePrefix(ep.Name)
	name := b.names.generate(ep.Namespace, prefix, "mirror", ep.Namespace, ep.Name, g.key)
	labels := map[string]string{}
	for k, v := range ep.Labels {
		labels[k] = v
	}
	labels[discoveryv1.LabelServiceName] = ep.Name
	labels[discoveryv1.LabelManagedBy] = controllerEndpointSliceMirroring
	annotations := map[string]string{}
	for k, v := range ep.Annotations {
		if k != annotationTriggerTimeEP && k != annotationLastApplied {
			annotations[k] = v
		}
	}
	sort.Slice(g.eps, func(i, j int) bool { return addrLess(&g.eps[i], &g.eps[j]) })
	s := &discoveryv1.EndpointSlice{
		TypeMeta: typeSlice,
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: prefix, Namespace: ep.Namespace,
			UID:             makeUID(kindEndpointSlice, ep.Namespace, name),
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{controllerRef(ep.Name, ep.UID, kindEndpoints)},
		},
		AddressType: at,
		Ports:       copyPorts(g.ports),
		Endpoints:   append([]discoveryv1.Endpoint{}, g.eps...),
	}
	return s
}

// mirrorPorts is epPortsToEpsPorts.
func mirrorPorts(in []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := []discoveryv1.EndpointPort{}
	for _, p := range in {
		p := *p.DeepCopy()
		out = append(out, discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol, AppProtocol: p.AppProtocol})
	}
	return out
}

// addressToEndpoint is the mirroring controller's: the IP in canonical form, its
// address type, ready as given, targetRef, nodeName and hostname copied.
func addressToEndpoint(a corev1.EndpointAddress, ready bool) (discoveryv1.Endpoint, discoveryv1.AddressType, bool) {
	ip, err := netip.ParseAddr(a.IP)
	if err != nil {
		return discoveryv1.Endpoint{}, "", false
	}
	ip = ip.Unmap()
	at := discoveryv1.AddressTypeIPv4
	if ip.Is6() {
		at = discoveryv1.AddressTypeIPv6
	}
	a = *a.DeepCopy()
	e := discoveryv1.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		TargetRef:  a.TargetRef,
		NodeName:   a.NodeName,
	}
	if a.Hostname != "" {
		e.Hostname = &a.Hostname
	}
	return e, at, true
}

// endpointID is what the controllers' EndpointSet hashes: addresses, hostname and
// target namespace/name.
func endpointID(e *discoveryv1.Endpoint) string {
	addrs := append([]string(nil), e.Addresses...)
	sort.Strings(addrs)
	h := ""
	if e.Hostname != nil {
		h = *e.Hostname
	}
	return strings.Join(addrs, ",") + "|" + h + "|" + refName(e)
}

// epPortKey is a comparable form of an EndpointPort (its appProtocol is a pointer).
type epPortKey struct {
	name, proto, app string
	port             int32
	hasApp           bool
}

func toPortKey(p corev1.EndpointPort) epPortKey {
	k := epPortKey{name: p.Name, proto: string(p.Protocol), port: p.Port}
	if p.AppProtocol != nil {
		k.app, k.hasApp = *p.AppProtocol, true
	}
	return k
}

type epAddrKey struct {
	ip  string
	uid types.UID
}

// repackSubsets is RepackSubsets, made deterministic: every address is mapped to
// the ports it serves (not ready wins over ready for one port), ports serving the
// same addresses are merged into one subset, addresses and subsets sorted.
func repackSubsets(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	addrs := map[epAddrKey]corev1.EndpointAddress{}
	byPort := map[epPortKey]map[epAddrKey]bool{}
	portOf := map[epPortKey]corev1.EndpointPort{}
	var portOrder []epPortKey
	visit := func(pk epPortKey, a corev1.EndpointAddress, ready bool) {
		k := epAddrKey{ip: a.IP}
		if a.TargetRef != nil {
			k.uid = a.TargetRef.UID
		}
		if _, ok := addrs[k]; !ok {
			addrs[k] = a
		}
		if byPort[pk] == nil {
			byPort[pk] = map[epAddrKey]bool{}
			portOrder = append(portOrder, pk)
		}
		if was, found := byPort[pk][k]; !found || was {
			byPort[pk][k] = ready
		}
	}
	for _, ss := range subsets {
		ports := ss.Ports
		if len(ports) == 0 {
			ports = []corev1.EndpointPort{{Port: -1}}
		}
		for _, p := range ports {
			pk := toPortKey(p)
			portOf[pk] = p
			for _, a := range ss.Addresses {
				visit(pk, a, true)
			}
			for _, a := range ss.NotReadyAddresses {
				visit(pk, a, false)
			}
		}
	}
	return mergeByAddresses(addrs, byPort, portOf, portOrder)
}

func mergeByAddresses(addrs map[epAddrKey]corev1.EndpointAddress, byPort map[epPortKey]map[epAddrKey]bool,
	portOf map[epPortKey]corev1.EndpointPort, portOrder []epPortKey) []corev1.EndpointSubset {
	subsets := map[string]*corev1.EndpointSubset{}
	for _, pk := range portOrder {
		keys := make([]epAddrKey, 0, len(byPort[pk]))
		for k := range byPort[pk] {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return lessAddrKey(keys[i], keys[j]) })
		var sig strings.Builder
		for _, k := range keys {
			sig.WriteString(k.ip + "|" + string(k.uid) + "|" + strconv.FormatBool(byPort[pk][k]) + ";")
		}
		ss := subsets[sig.String()]
		if ss == nil {
			ss = &corev1.EndpointSubset{}
			for _, k := range keys {
				if byPort[pk][k] {
					ss.Addresses = append(ss.Addresses, addrs[k])
				} else {
					ss.NotReadyAddresses = append(ss.NotReadyAddresses, addrs[k])
				}
			}
			subsets[sig.String()] = ss
		}
		if p := portOf[pk]; p.Port > 0 {
			ss.Ports = append(ss.Ports, p)
		}
	}
	out := make([]corev1.EndpointSubset, 0, len(subsets))
	for _, sig := range sortedKeys(subsets) {
		out = append(out, *subsets[sig])
	}
	return out
}

// lessAddrKey is LessEndpointAddress: by IP bytes, then target UID.
func lessAddrKey(a, b epAddrKey) bool {
	if a.ip != b.ip {
		return a.ip < b.ip
	}
	return a.uid < b.uid
}

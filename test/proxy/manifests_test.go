package proxy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// manifestFile is the one file of a test's manifests directory; every apply
// rewrites it whole (atomically: temp dotfile, then rename).
const manifestFile = "cluster.yaml"

// apply makes the manifests exactly objs plus the Nodes node1 and node2.
func (c *cluster) apply(objs ...any) {
	c.t.Helper()
	writeManifests(c.t, c.dir, append(nodes(), objs...)...)
}

// writeManifests writes objs as a multi-document YAML file in dir.
func writeManifests(t testing.TB, dir string, objs ...any) {
	t.Helper()
	var b bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			t.Fatalf("manifest: %v", err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	tmp := filepath.Join(dir, ".cluster.yaml.tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, manifestFile)); err != nil {
		t.Fatalf("manifest: %v", err)
	}
}

// nodes are node1 (this node: 172.26.236.177, fd00:26:236::177) and node2.
func nodes() []any {
	node := func(name string, ips ...string) *corev1.Node {
		n := &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		}
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	return []any{
		node(nodeName, nodeIP.String(), nodeIP6.String()),
		node(otherNode, "172.26.236.178", "fd00:26:236::178"),
	}
}

// newService returns a selector-less ClusterIP Service default/name with the
// given clusterIPs (one, or IPv4 then IPv6 for dual-stack) and ports.
func newService(name string, clusterIPs []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  clusterIPs[0],
			ClusterIPs: clusterIPs,
			Ports:      ports,
		},
	}
	single := corev1.IPFamilyPolicySingleStack
	s.Spec.IPFamilyPolicy = &single
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	if len(clusterIPs) == 2 {
		dual := corev1.IPFamilyPolicyRequireDualStack
		s.Spec.IPFamilyPolicy = &dual
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	return s
}

// svcPort is Service port port/proto, named "<proto>-<port>", to the pods'
// echo port.
func svcPort(proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{
		Name:       strings.ToLower(string(proto)) + "-" + strconv.Itoa(int(port)),
		Protocol:   proto,
		Port:       port,
		TargetPort: intstr.FromInt32(echoPort),
	}
}

func tcpPort(port int32) corev1.ServicePort { return svcPort(corev1.ProtocolTCP, port) }
func udpPort(port int32) corev1.ServicePort { return svcPort(corev1.ProtocolUDP, port) }

// endpoint is one endpoint of a hand-written EndpointSlice.
type endpoint struct {
	pod                         *pod
	node                        string
	ready, serving, terminating bool
}

// local and remote are ready endpoints on this node and on node2.
func local(p *pod) endpoint  { return endpoint{pod: p, node: nodeName, ready: true, serving: true} }
func remote(p *pod) endpoint { return endpoint{pod: p, node: otherNode, ready: true, serving: true} }

// terminatingEp is a terminating endpoint on this node, serving or not.
func terminatingEp(p *pod, serving bool) endpoint {
	return endpoint{pod: p, node: nodeName, serving: serving, terminating: true}
}

// endpointSlice returns a user EndpointSlice of svc for one family, with svc's
// ports (named as svc's, to the echo port) and eps.
func endpointSlice(svc *corev1.Service, fam corev1.IPFamily, eps ...endpoint) *discoveryv1.EndpointSlice {
	at, suffix := discoveryv1.AddressTypeIPv4, "-v4"
	if fam == corev1.IPv6Protocol {
		at, suffix = discoveryv1.AddressTypeIPv6, "-v6"
	}
	sl := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name: svc.Name + suffix, Namespace: svc.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   "svcnet-proxy-test",
			},
		},
		AddressType: at,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, sp := range svc.Spec.Ports {
		name, proto, port := sp.Name, sp.Protocol, int32(echoPort)
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
	}
	for _, e := range eps {
		addr := e.pod.ip.String()
		if at == discoveryv1.AddressTypeIPv6 {
			addr = e.pod.ip6.String()
		}
		ready, serving, term, node := e.ready, e.serving, e.terminating, e.node
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &term},
			NodeName:   &node,
		})
	}
	return sl
}

// v4 is endpointSlice for IPv4.
func v4(svc *corev1.Service, eps ...endpoint) *discoveryv1.EndpointSlice {
	return endpointSlice(svc, corev1.IPv4Protocol, eps...)
}

// podObject is the Pod of p, running on node with labels, ready or not; the
// embedded control plane builds EndpointSlices from it.
func podObject(p *pod, node string, labels map[string]string, ready bool) *corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "echo", Image: "echo"}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      p.ip.String(),
			PodIPs:     []corev1.PodIP{{IP: p.ip.String()}, {IP: p.ip6.String()}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
		},
	}
}

package difftest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// ServiceCIDRs is the apiserver's --service-cluster-ip-range for the fixture
// (the IP plan's service networks): its ClusterIPs are fixed inside them.
const ServiceCIDRs = "10.96.0.0/12,fd00:96::/108"

// Fixture is the differential test's cluster state: Services of every kind
// with hand-written EndpointSlices (so every endpoint condition, hostname,
// address family and slice split is exactly as chosen), and Pods. Namespaces
// lists every namespace it creates, including ones without Services.
type Fixture struct {
	Zone       string
	Namespaces []string
	Pods       []*corev1.Pod
	Services   []*corev1.Service
	Slices     []*discoveryv1.EndpointSlice
	// Sentinel is created last: when a server answers Sentinel A with
	// SentinelIP, it has the whole fixture.
	Sentinel   Query
	SentinelIP string
}

// fixture node and endpoint node.
const fixtureNode = "node1"

// ep is an endpoint of a hand-written slice.
type ep struct {
	ip, hostname string
	ready        bool
	pod          string // targetRef Pod name, if any
}

type slice struct {
	name   string
	family discoveryv1.AddressType
	eps    []ep
	// noPorts leaves the slice's ports empty (a headless Service without ports).
	noPorts bool
}

// svc describes one Service and its slices.
type svc struct {
	ns, name     string
	typ          corev1.ServiceType
	clusterIPs   []string // "None" for headless
	policy       corev1.IPFamilyPolicy
	families     []corev1.IPFamily
	ports        []corev1.ServicePort
	externalName string
	pnr          bool
	slices       []slice
}

func port(name string, proto corev1.Protocol, port, target int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
}

var (
	v4   = []corev1.IPFamily{corev1.IPv4Protocol}
	v6   = []corev1.IPFamily{corev1.IPv6Protocol}
	dual = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	none = []string{corev1.ClusterIPNone}
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP
	ipv4 = discoveryv1.AddressTypeIPv4
	ipv6 = discoveryv1.AddressTypeIPv6
)

// long63 is a 63-character label (the longest a Service name can be).
var long63 = "long-" + strings.Repeat("x", 57) + "z"

// services is the fixture's Service list, in creation order.
func services() []svc {
	single, require := corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyRequireDualStack
	return []svc{
		// The cluster DNS Service, as kubeadm names it (the zone's NS).
		{ns: "kube-system", name: "kube-dns", clusterIPs: []string{"10.96.0.10"}, policy: single, families: v4,
			ports:  []corev1.ServicePort{port("dns", udp, 53, 53), port("dns-tcp", tcp, 53, 53), port("metrics", tcp, 9153, 9153)},
			slices: []slice{{name: "kube-dns-1", family: ipv4, eps: []ep{{ip: "192.168.1.53", ready: true}}}}},
		// ClusterIP, single stack, named ports of every protocol; endpoints with
		// and without hostname, one not ready.
		{ns: "alpha", name: "web", clusterIPs: []string{"10.96.10.1"}, policy: single, families: v4,
			ports: []corev1.ServicePort{port("http", tcp, 80, 8080), port("https", tcp, 443, 8443), port("dns", udp, 53, 5353), port("assoc", sctp, 9999, 9999)},
			slices: []slice{{name: "web-1", family: ipv4, eps: []ep{
				{ip: "192.168.1.21", ready: true, pod: "pod-a"}, {ip: "192.168.1.22", hostname: "web-b", ready: true}, {ip: "192.168.1.23"},
			}}}},
		// One unnamed port.
		{ns: "alpha", name: "single", clusterIPs: []string{"10.96.10.2"}, policy: single, families: v4,
			ports:  []corev1.ServicePort{port("", tcp, 8080, 8080)},
			slices: []slice{{name: "single-1", family: ipv4, eps: []ep{{ip: "192.168.1.24", ready: true}}}}},
		// No endpoints at all.
		{ns: "alpha", name: "empty", clusterIPs: []string{"10.96.10.3"}, policy: single, families: v4,
			ports: []corev1.ServicePort{port("http", tcp, 80, 80)}},
		// Dual stack, one slice per family.
		{ns: "alpha", name: "dual", clusterIPs: []string{"10.96.10.4", "fd00:96::a:4"}, policy: require, families: dual,
			ports: []corev1.ServicePort{port("http", tcp, 80, 8080)},
			slices: []slice{
				{name: "dual-v4", family: ipv4, eps: []ep{{ip: "192.168.1.25", ready: true}}},
				{name: "dual-v6", family: ipv6, eps: []ep{{ip: "fd00:192:168:1::25", ready: true}}},
			}},
		// IPv6 only, an endpoint with a hostname.
		{ns: "alpha", name: "v6only", clusterIPs: []string{"fd00:96::a:5"}, policy: single, families: v6,
			ports:  []corev1.ServicePort{port("grpc", tcp, 9090, 9090)},
			slices: []slice{{name: "v6only-1", family: ipv6, eps: []ep{{ip: "fd00:192:168:1::26", hostname: "g0", ready: true}}}}},
		// NodePort (DNS as for ClusterIP).
		{ns: "alpha", name: "np", typ: corev1.ServiceTypeNodePort, clusterIPs: []string{"10.96.10.6"}, policy: single, families: v4,
			ports: []corev1.ServicePort{port("http", tcp, 80, 80)}},
		// Headless: several slices, both families, hostnames, ready and not.
		{ns: "alpha", name: "hl", clusterIPs: none, policy: corev1.IPFamilyPolicyPreferDualStack, families: dual,
			ports: []corev1.ServicePort{port("http", tcp, 80, 8080), port("metrics", tcp, 9100, 9100), port("syslog", udp, 514, 514)},
			slices: []slice{
				{name: "hl-a", family: ipv4, eps: []ep{
					{ip: "192.168.1.10", hostname: "hl-0", ready: true, pod: "hl-0"}, {ip: "192.168.1.11", hostname: "hl-1", ready: true},
					{ip: "192.168.1.12", ready: true}, {ip: "192.168.1.13", hostname: "hl-3"},
				}},
				{name: "hl-b", family: ipv4, eps: []ep{{ip: "192.168.2.10", hostname: "hl-2", ready: true}, {ip: "192.168.2.11"}}},
				{name: "hl-c", family: ipv6, eps: []ep{{ip: "fd00:192:168:1::10", hostname: "hl-0", ready: true}, {ip: "fd00:192:168:1::", ready: true}}},
			}},
		// Headless, endpoints but none ready.
		{ns: "alpha", name: "hl-noready", clusterIPs: none, policy: single, families: v4,
			ports:  []corev1.ServicePort{port("http", tcp, 80, 80)},
			slices: []slice{{name: "hl-noready-1", family: ipv4, eps: []ep{{ip: "192.168.1.30", hostname: "nr-0"}, {ip: "192.168.1.31"}}}}},
		// Headless without any slice.
		{ns: "alpha", name: "hl-noslice", clusterIPs: none, policy: single, families: v4,
			ports: []corev1.ServicePort{port("http", tcp, 80, 80)}},
		// publishNotReadyAddresses: the first endpoint as the EndpointSlice
		// controller writes an unready Pod of such a Service (ready, not
		// serving), the second written by hand not ready.
		{ns: "alpha", name: "hl-pnr", clusterIPs: none, policy: single, families: v4, pnr: true,
			ports:  []corev1.ServicePort{port("http", tcp, 80, 80)},
			slices: []slice{{name: "hl-pnr-1", family: ipv4, eps: []ep{{ip: "192.168.1.40", hostname: "pnr-0", ready: true}, {ip: "192.168.1.41", hostname: "pnr-1"}}}}},
		// Headless without ports.
		{ns: "alpha", name: "hl-noports", clusterIPs: none, policy: single, families: v4,
			slices: []slice{{name: "hl-noports-1", family: ipv4, noPorts: true, eps: []ep{{ip: "192.168.1.50", hostname: "np-0", ready: true}}}}},
		// ExternalName out of the zone and into it.
		{ns: "alpha", name: "ext", typ: corev1.ServiceTypeExternalName, externalName: "www.example.com"},
		{ns: "alpha", name: "ext-in", typ: corev1.ServiceTypeExternalName, externalName: "web.alpha.svc.cluster.local"},
		// The same name in another namespace.
		{ns: "beta", name: "web", clusterIPs: []string{"10.96.20.1"}, policy: single, families: v4,
			ports:  []corev1.ServicePort{port("http", tcp, 80, 80), port("https", tcp, 443, 443)},
			slices: []slice{{name: "web-1", family: ipv4, eps: []ep{{ip: "192.168.2.30", ready: true}}}}},
		// Headless, IPv6 only.
		{ns: "beta", name: "hl-v6", clusterIPs: none, policy: single, families: v6,
			ports: []corev1.ServicePort{port("http", tcp, 80, 80)},
			slices: []slice{{name: "hl-v6-1", family: ipv6, eps: []ep{
				{ip: "fd00:192:168:2::40", hostname: "v6-0", ready: true}, {ip: "fd00:192:168:2::41", ready: true},
			}}}},
		// Headless dual stack, the same hostname in both families.
		{ns: "beta", name: "hl-dual", clusterIPs: none, policy: require, families: dual,
			ports: []corev1.ServicePort{port("http", tcp, 80, 80)},
			slices: []slice{
				{name: "hl-dual-v4", family: ipv4, eps: []ep{{ip: "192.168.2.50", hostname: "d-0", ready: true}}},
				{name: "hl-dual-v6", family: ipv6, eps: []ep{{ip: "fd00:192:168:2::50", hostname: "d-0", ready: true}}},
			}},
		// The longest Service name, with an endpoint hostname of 63 too.
		{ns: "beta", name: long63, clusterIPs: none, policy: single, families: v4,
			ports:  []corev1.ServicePort{port("http", tcp, 80, 80)},
			slices: []slice{{name: "long-1", family: ipv4, eps: []ep{{ip: "192.168.2.60", hostname: long63, ready: true}}}}},
		// Created last: see Fixture.Sentinel.
		{ns: "beta", name: "zz-sentinel", clusterIPs: none, policy: single, families: v4,
			ports:  []corev1.ServicePort{port("http", tcp, 80, 80)},
			slices: []slice{{name: "zz-sentinel-1", family: ipv4, eps: []ep{{ip: "192.168.9.9", ready: true}}}}},
	}
}

// pods of the fixture: namespace, name, IPs. "gamma" has Pods and no Service.
var pods = []struct {
	ns, name string
	ips      []string
}{
	{"alpha", "hl-0", []string{"192.168.1.10"}},
	{"alpha", "pod-a", []string{"192.168.1.21"}},
	{"beta", "pod-b", []string{"192.168.2.20", "fd00:192:168:2::20"}},
	{"gamma", "pod-g", []string{"192.168.3.30"}},
}

// NewFixture builds the fixture's objects for zone (default cluster.local).
func NewFixture(zone string) *Fixture {
	if zone == "" {
		zone = "cluster.local"
	}
	f := &Fixture{Zone: zone, Namespaces: []string{"alpha", "beta", "gamma", "delta"}} // kube-system exists
	for _, p := range pods {
		f.Pods = append(f.Pods, newPod(p.ns, p.name, p.ips))
	}
	for _, s := range services() {
		f.Services = append(f.Services, s.service())
		for _, sl := range s.slices {
			f.Slices = append(f.Slices, s.slice(sl))
		}
	}
	last := f.Services[len(f.Services)-1]
	f.Sentinel = Query{Name: last.Name + "." + last.Namespace + ".svc." + zone + ".", Type: dns.TypeA}
	f.SentinelIP = f.Slices[len(f.Slices)-1].Endpoints[0].Addresses[0]
	return f
}

func (s svc) service() *corev1.Service {
	o := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name},
		Spec: corev1.ServiceSpec{
			Type: s.typ, Ports: s.ports, ExternalName: s.externalName,
			PublishNotReadyAddresses: s.pnr, IPFamilies: s.families,
		},
	}
	if o.Spec.Type == "" {
		o.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if o.Spec.Type != corev1.ServiceTypeExternalName {
		o.Spec.ClusterIP, o.Spec.ClusterIPs = s.clusterIPs[0], s.clusterIPs
		o.Spec.IPFamilyPolicy = ptr.To(s.policy)
	}
	return o
}

func (s svc) slice(sl slice) *discoveryv1.EndpointSlice {
	o := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: sl.name, Labels: map[string]string{
			discoveryv1.LabelServiceName: s.name, discoveryv1.LabelManagedBy: "svcnet-difftest",
		}},
		AddressType: sl.family,
	}
	if !sl.noPorts {
		for _, p := range s.ports {
			o.Ports = append(o.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(p.TargetPort.IntVal)})
		}
	}
	for _, e := range sl.eps {
		end := discoveryv1.Endpoint{
			Addresses: []string{e.ip},
			// The controller's publishNotReadyAddresses endpoint is ready but
			// not serving; any other endpoint serves exactly when ready.
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.ready && !s.pnr), Terminating: ptr.To(false)},
			NodeName:   ptr.To(fixtureNode),
		}
		if e.hostname != "" {
			end.Hostname = ptr.To(e.hostname)
		}
		if e.pod != "" {
			end.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: s.ns, Name: e.pod}
		}
		o.Endpoints = append(o.Endpoints, end)
	}
	return o
}

func newPod(ns, name string, ips []string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: fixtureNode, Containers: []corev1.Container{{Name: "c", Image: "none"}}},
	}
	now := metav1.Now()
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, StartTime: &now, PodIP: ips[0],
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// createTimeout bounds each API call of Create.
const createTimeout = 30 * time.Second

// Create creates the fixture through c: namespaces, Pods (then their status),
// Services, slices, in that order, the sentinel last. It stops at the first
// error, naming the object.
func (f *Fixture) Create(ctx context.Context, c kubernetes.Interface) error {
	call := func(what string, fn func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, createTimeout)
		defer cancel()
		if err := fn(cctx); err != nil {
			return fmt.Errorf("fixture: %s: %w", what, err)
		}
		return nil
	}
	for _, ns := range f.Namespaces {
		if err := call("create namespace "+ns, func(ctx context.Context) error {
			_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	for _, p := range f.Pods {
		id := "pod " + p.Namespace + "/" + p.Name
		if err := call("create "+id, func(ctx context.Context) error {
			created, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			created.Status = p.Status
			_, err = c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	// Each Service right before its slices, so the sentinel's slice is last.
	slices := f.Slices
	for _, s := range f.Services {
		if err := call("create service "+s.Namespace+"/"+s.Name, func(ctx context.Context) error {
			_, err := c.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
		for len(slices) > 0 && slices[0].Namespace == s.Namespace && slices[0].Labels[discoveryv1.LabelServiceName] == s.Name {
			sl := slices[0]
			slices = slices[1:]
			if err := call("create endpointslice "+sl.Namespace+"/"+sl.Name, func(ctx context.Context) error {
				_, err := c.DiscoveryV1().EndpointSlices(sl.Namespace).Create(ctx, sl, metav1.CreateOptions{})
				return err
			}); err != nil {
				return err
			}
		}
	}
	if len(slices) > 0 {
		return fmt.Errorf("fixture: endpointslice %s/%s not created: slices out of Service order", slices[0].Namespace, slices[0].Name)
	}
	return nil
}

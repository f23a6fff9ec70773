package lab

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// The lab's cluster DNS, as a kubeadm cluster has it: the Service
// kube-system/kube-dns at ClusterDNS (10.96.0.10; fd00:96::a in an IPv6
// lab, both in a dual-stack one), which every pod's
// resolv.conf names, backed by one pod, kube-system/svcnet-dns on node1, that
// runs `svcnet dns` from the same state as the nodes' proxies. A pod's query
// therefore crosses its node's proxy (ClusterIP DNAT, and the node network
// when the pod is on another node) like any Service traffic.
//
// The nodes' proxies need no DNS: they read state from a file (--state) or
// from the API server at an IP address (--kubeconfig), so nothing they do
// waits on the DNS pod whose traffic they carry. The nodes' resolv.conf
// (resolver.go) names ClusterDNS for what lab commands resolve from a node.
const (
	DNSNamespace = metav1.NamespaceSystem
	DNSService   = "kube-dns"
	DNSPod       = "svcnet-dns"
	// DNSImage is the image that makes a lab pod run `svcnet dns` (with the
	// lab's state flags, on :53, metrics on :9153) instead of `svcnet echo`.
	DNSImage = "svcnet-dns"

	dnsPort        = 53
	dnsMetricsPort = 9153
	// dnsReadyTimeout bounds the wait for a DNS pod to answer from synced state
	// (a kube source lists Services, EndpointSlices and Pods first).
	dnsReadyTimeout = 60 * time.Second
	// clusterDNSTimeout bounds the wait for ClusterDNS to answer through the
	// proxies once they run.
	clusterDNSTimeout = 30 * time.Second
)

// dnsLabels select the DNS pod, as CoreDNS's and kube-dns's are selected.
var dnsLabels = map[string]string{"k8s-app": "kube-dns"}

// kubeDNSService is kube-system/kube-dns in a lab of stack s,
// kube-dns-compatible: the cluster DNS addresses of s (RequireDualStack in a
// dual-stack lab), dns 53/UDP, dns-tcp 53/TCP and metrics 9153/TCP,
// selecting k8s-app: kube-dns.
func kubeDNSService(s topology.Stack) *corev1.Service {
	policy := corev1.IPFamilyPolicySingleStack
	if len(s) > 1 {
		policy = corev1.IPFamilyPolicyRequireDualStack
	}
	dnsIPs := s.ClusterDNS()
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: DNSService, Namespace: DNSNamespace, Labels: dnsLabels},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeClusterIP,
			ClusterIP:      dnsIPs[0].String(),
			IPFamilyPolicy: &policy,
			Selector:       dnsLabels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: dnsPort, TargetPort: intstr.FromInt32(dnsPort)},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: dnsPort, TargetPort: intstr.FromInt32(dnsPort)},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: dnsMetricsPort, TargetPort: intstr.FromInt32(dnsMetricsPort)},
			},
		},
	}
	for _, a := range dnsIPs {
		svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, a.String())
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, corev1.IPFamily(ipfamily.Of(a).String()))
	}
	return svc
}

// dnsPod is kube-system/svcnet-dns on node1, the one pod behind kube-dns.
func dnsPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: DNSPod, Namespace: DNSNamespace, Labels: dnsLabels},
		Spec: corev1.PodSpec{
			NodeName: topology.NodeName(1),
			// As CoreDNS: the node's resolver, not itself.
			DNSPolicy: corev1.DNSDefault,
			Containers: []corev1.Container{{
				Name:  "dns",
				Image: DNSImage,
				Ports: []corev1.ContainerPort{
					{Name: "dns", ContainerPort: dnsPort, Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", ContainerPort: dnsPort, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: dnsMetricsPort, Protocol: corev1.ProtocolTCP},
				},
			}},
		},
	}
}

// isDNSPod reports whether the pod runs svcnet dns (a container of DNSImage).
func isDNSPod(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Image == DNSImage {
			return true
		}
	}
	return false
}

// startClusterDNS creates kube-dns and its pod, and returns once the pod
// answers on its own address from synced state (see applyPod).
func (l *Lab) startClusterDNS(ctx context.Context) error {
	objs := []controlplane.Object{{Origin: "lab", Obj: kubeDNSService(l.c.Info.Stack())}, {Origin: "lab", Obj: dnsPod()}}
	if errs := l.Apply(ctx, objs); len(errs) > 0 {
		return fmt.Errorf("lab %s: cluster DNS: %v", l.c.Names.Lab, errs)
	}
	return nil
}

// waitClusterDNS waits until each cluster DNS address, queried from node1
// through its proxy, answers kube-dns's own name with that address (A for
// IPv4, AAAA for IPv6): the Service is programmed in every family, its
// endpoint is the DNS pod, and the pod serves.
func (l *Lab) waitClusterDNS(ctx context.Context) error {
	ns, err := netns.Open(l.c.Names.Node(1))
	if err != nil {
		return err
	}
	defer ns.Close()
	name := fmt.Sprintf("%s.%s.svc.%s.", DNSService, DNSNamespace, topology.DNSZone)
	for _, dnsIP := range l.c.Info.Stack().ClusterDNS() {
		f := ipfamily.Of(dnsIP)
		server := netip.AddrPortFrom(dnsIP, dnsPort)
		err = pollDNS(ctx, clusterDNSTimeout, netns.Dialer(ns), server, name, f, func(a dnsAnswer) error {
			if len(a.Addrs) != 1 || a.Addrs[0] != dnsIP {
				return fmt.Errorf("%s %s addresses %v (rcode %s), want %s", name, f, a.Addrs, a.Rcode, dnsIP)
			}
			return nil
		}, nil)
		if err != nil {
			return fmt.Errorf("lab %s: cluster DNS %s from node %s: %w", l.c.Names.Lab, server, topology.NodeName(1), err)
		}
	}
	return nil
}

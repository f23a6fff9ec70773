//lint:file-ignore SA1019 kubectl get lists v1 Endpoints (get ep), as kubectl does

package kube

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestGetParityWithKubectl: svcnet get against a real API server prints
// what real kubectl (built from the Kubernetes module, tools/k8s) prints
// for the same arguments, byte for byte: every argument form, selector
// and -o form svcnet get takes, and the same exit status. Tables are
// compared with their AGE cells blanked (the two commands run a second
// apart at most); each line kubectl prints on stderr must be in svcnet's
// (which says "svcnet: " where kubectl says "error: ").
func TestGetParityWithKubectl(t *testing.T) {
	p := newSideBySide(t)
	ctx := p.ctx
	c := p.env.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := func(ns, name string, typ corev1.ServiceType, labels map[string]string, ports ...int32) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name}}}
		for i, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: p, TargetPort: intstr.FromInt32(8080 + int32(i))})
		}
		return s
	}
	for _, s := range []*corev1.Service{
		svc("default", "web", corev1.ServiceTypeClusterIP, map[string]string{"app": "web", "tier": "front"}, 80, 443),
		svc("default", "np", corev1.ServiceTypeNodePort, map[string]string{"app": "web"}, 80),
		svc("default", "lb-10", corev1.ServiceTypeLoadBalancer, nil, 80),
		svc("default", "lb-9", corev1.ServiceTypeLoadBalancer, map[string]string{"tier": "back"}, 8080),
		svc("other", "api", corev1.ServiceTypeClusterIP, map[string]string{"app": "api"}, 80),
		dualStack(svc("default", "dual", corev1.ServiceTypeClusterIP, map[string]string{"app": "web"}, 80)),
	} {
		if _, err := c.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"192.168.1.10"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"192.168.2.10"}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("p0"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// v1 Endpoints as the endpoints controller keeps them (no controller
	// runs here): five ready addresses (kubectl shows three and "+ 2
	// more...") and one not ready.
	if _, err := c.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{ //lint:ignore SA1019 kubectl get ep reads v1 Endpoints
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses:         []corev1.EndpointAddress{{IP: "192.168.1.10"}, {IP: "192.168.1.11"}, {IP: "192.168.1.12"}, {IP: "192.168.1.13"}, {IP: "192.168.1.14"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "192.168.2.10"}},
			Ports:             []corev1.EndpointPort{{Name: "p0", Port: 8080, Protocol: corev1.ProtocolTCP}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "svcnet-echo"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	age := regexp.MustCompile(`(?m)\b\d+(s|m\d*s?)\b( *)`)
	for _, args := range [][]string{
		{"svc"}, {"svc", "-A"}, {"svc", "-o", "wide"}, {"services", "-n", "other"},
		{"svc", "web"}, {"svc", "web", "np"}, {"svc/web", "svc/np"}, {"svc,endpointslices"}, {"all"},
		{"svc", "-l", "app=web"}, {"svc", "-A", "-l", "app in (web,api)"}, {"svc", "-l", "!tier"}, {"svc", "-l", "tier!=front"},
		{"svc", "--field-selector", "metadata.name=web"}, {"svc", "-A", "--field-selector", "metadata.namespace!=default"},
		{"svc", "-o", "name"}, {"svc,pods", "-o", "name"}, {"svc", "web", "-o", "name"},
		{"svc", "web", "-o", "json"}, {"svc", "-o", "json"}, {"svc", "-o", "yaml"}, {"svc", "web", "-o", "yaml"},
		{"svc", "-o", "jsonpath={.items[*].metadata.name}"}, {"svc", "web", "-o", "jsonpath={.spec.clusterIP}"},
		{"svc", "-o", "jsonpath-as-json={.items[*].metadata.name}"},
		{"svc", "-o", "custom-columns=NAME:.metadata.name,IP:.spec.clusterIP,PORTS:.spec.ports[*].port,NONE:.spec.nothing"},
		{"svc", "--no-headers", "-o", "custom-columns=NAME:metadata.name"},
		{"svc", "-o", "go-template={{range .items}}{{.metadata.name}} {{end}}"},
		{"svc", "--show-labels"}, {"svc", "--no-headers"}, {"svc", "-A", "--show-labels", "-o", "wide"},
		{"svc", "--sort-by", ".metadata.name"}, {"svc", "--sort-by", "{.spec.ports[0].port}"},
		{"svc", "-A", "--sort-by", ".metadata.name", "-o", "name"},
		{"pods"}, {"pods", "-o", "wide"}, {"endpointslices"}, {"endpointslices", "-o", "wide"},
		{"ep"}, {"endpoints", "-A"}, {"ep", "web", "-o", "yaml"}, {"ep,svc", "-o", "name"},
		{"svc", "nope"}, {"svc", "web", "nope"}, {"svc", "web", "-A"}, {"svc", "-n", "empty"}, {"svc", "-l", "app=nothing"}, {"svc", "-o", "json", "-l", "app=nothing"},
	} {
		k, s := p.both(append([]string{"get"}, args...)...)
		kout, kerr, kcode, sout, serr, scode := k.stdout, k.stderr, k.code, s.stdout, s.stderr, s.code
		table := true
		for i, a := range args {
			if a == "-o" && i+1 < len(args) && args[i+1] != "wide" {
				table = false
			}
		}
		if table {
			kout, sout = age.ReplaceAllString(kout, "AGE$2"), age.ReplaceAllString(sout, "AGE$2")
		}
		if kout != sout || kcode != scode {
			t.Errorf("get %q: kubectl exit %d, svcnet exit %d\nkubectl:\n%s\nsvcnet:\n%s\nsvcnet stderr: %s", args, kcode, scode, kout, sout, serr)
		}
		for _, line := range strings.Split(strings.TrimSpace(kerr), "\n") {
			// kubectl says "error: " where svcnet says "svcnet: ".
			line = strings.TrimPrefix(line, "error: ")
			if line != "" && !strings.Contains(serr, line) {
				t.Errorf("get %q: kubectl says %q on stderr, svcnet:\n%s", args, line, serr)
			}
		}
	}
}

// dualStack makes s PreferDualStack: a ClusterIP of each family, of which
// kubectl's table shows the primary one.
func dualStack(s *corev1.Service) *corev1.Service {
	s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	return s
}

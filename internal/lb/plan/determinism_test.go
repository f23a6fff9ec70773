package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// render is Output with errors as text, for comparing.
func render(out Output) []string {
	var s []string
	for _, r := range out.Results {
		s = append(s, r.Key.String()+": "+summary(r))
	}
	for _, err := range out.PoolErrors {
		s = append(s, "pool error: "+err.Error())
	}
	return s
}

func TestDesiredDeterministic(t *testing.T) {
	in := Input{
		Pools: []*pool.IPAddressPool{
			lab, ipPool("nodes", "node-ip"), ipPool("v6", "", "fd00::/126"),
			ipPool("overlap", "", "172.26.236.185-172.26.236.200"), ipPool("bad", "bgp"),
		},
		Nodes: []*corev1.Node{
			node("n1", true, "int:172.26.236.177"), node("n2", true, "int:172.26.236.178"), node("n3", false, "int:172.26.236.179"),
		},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("s3", "n2=true"), slice("s7", "n1=true", "n2=false")},
	}
	for i := range 30 {
		var opts []func(*corev1.Service)
		switch i % 6 {
		case 0:
			opts = append(opts, ann(AnnotationAddressPool, "nodes"), ports(int32(80+i%4)))
		case 1:
			opts = append(opts, ann(AnnotationAllowSharedIP, "k"), ports(int32(1000+i)))
		case 2:
			opts = append(opts, dual(corev1.IPFamilyPolicyPreferDualStack))
		case 3:
			opts = append(opts, local, ann(AnnotationAddressPool, "nodes"), ports(int32(2000+i)))
		case 4:
			opts = append(opts, status(fmt.Sprintf("172.26.236.%d", 180+i%10)))
		case 5:
			opts = append(opts, typ(corev1.ServiceTypeClusterIP), status("172.26.236.181"))
		}
		in.Services = append(in.Services, lbSvc(fmt.Sprintf("s%d", i), i%7, opts...))
	}
	want := render(Desired(Config{IsDefault: true}, in))
	if len(want) < 30 {
		t.Fatalf("only %d results", len(want))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		r.Shuffle(len(in.Pools), func(i, j int) { in.Pools[i], in.Pools[j] = in.Pools[j], in.Pools[i] })
		r.Shuffle(len(in.Services), func(i, j int) { in.Services[i], in.Services[j] = in.Services[j], in.Services[i] })
		r.Shuffle(len(in.Nodes), func(i, j int) { in.Nodes[i], in.Nodes[j] = in.Nodes[j], in.Nodes[i] })
		if d := cmp.Diff(want, render(Desired(Config{IsDefault: true}, in))); d != "" {
			t.Fatalf("shuffled input changes the output (-first +shuffled):\n%s", d)
		}
	}
}

func TestEqualIngress(t *testing.T) {
	vip, proxy := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy
	e1, e2 := "x", "x"
	a := []corev1.LoadBalancerIngress{{IP: "10.0.0.1", IPMode: &vip}, {IP: "fd00::1", IPMode: &vip}}
	cases := []struct {
		name string
		b    []corev1.LoadBalancerIngress
		want bool
	}{
		{"same", []corev1.LoadBalancerIngress{{IP: "10.0.0.1", IPMode: &vip}, {IP: "fd00::1", IPMode: &vip}}, true},
		{"other order, unset mode, other spelling", []corev1.LoadBalancerIngress{{IP: "fd00:0::1"}, {IP: "10.0.0.1"}}, true},
		{"other mode", []corev1.LoadBalancerIngress{{IP: "10.0.0.1", IPMode: &proxy}, {IP: "fd00::1", IPMode: &vip}}, false},
		{"missing one", []corev1.LoadBalancerIngress{{IP: "10.0.0.1", IPMode: &vip}}, false},
		{"other IP", []corev1.LoadBalancerIngress{{IP: "10.0.0.2", IPMode: &vip}, {IP: "fd00::1", IPMode: &vip}}, false},
		{"ports", []corev1.LoadBalancerIngress{{IP: "10.0.0.1", Ports: []corev1.PortStatus{{Port: 80}}}, {IP: "fd00::1"}}, false},
		{"hostname", []corev1.LoadBalancerIngress{{IP: "10.0.0.1", Hostname: "h"}, {IP: "fd00::1"}}, false},
	}
	for _, tc := range cases {
		if got := EqualIngress(a, tc.b); got != tc.want {
			t.Errorf("%s: EqualIngress = %v, want %v", tc.name, got, tc.want)
		}
		if got := EqualIngress(tc.b, a); got != tc.want {
			t.Errorf("%s (swapped): EqualIngress = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !EqualIngress(nil, []corev1.LoadBalancerIngress{}) {
		t.Error("nil and empty differ")
	}
	p1 := []corev1.LoadBalancerIngress{{IP: "10.0.0.1", Ports: []corev1.PortStatus{{Port: 443, Protocol: "TCP"}, {Port: 80, Protocol: "TCP", Error: &e1}}}}
	p2 := []corev1.LoadBalancerIngress{{IP: "10.0.0.1", Ports: []corev1.PortStatus{{Port: 80, Protocol: "TCP", Error: &e2}, {Port: 443, Protocol: "TCP"}}}}
	if !EqualIngress(p1, p2) {
		t.Error("same ports in another order, errors at other addresses, differ")
	}
}

package install

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(podCIDR string, podCIDRs ...string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: podCIDRs}}
}

func TestPodCIDRs(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want string // joined CIDRs, or the error's text
	}{
		{"dual-stack", node("192.168.1.0/24", "192.168.1.0/24", "fd00:192:168:1::/64"), "192.168.1.0/24,fd00:192:168:1::/64"},
		{"IPv6 first", node("fd00:192:168:1::/64", "fd00:192:168:1::/64", "192.168.1.0/24"), "fd00:192:168:1::/64,192.168.1.0/24"},
		{"podCIDR only", node("10.244.3.0/24"), "10.244.3.0/24"},
		{"podCIDRs only", node("", "10.244.3.0/24"), "10.244.3.0/24"},
		{"none", node(""), "node node1: no pod CIDR (spec.podCIDRs is empty)"},
		{"not a CIDR", node("", "10.244.3.0"), `node node1: spec.podCIDRs[0] "10.244.3.0": not a CIDR`},
		{"host bits", node("", "10.244.3.1/24"), `node node1: spec.podCIDRs[0] "10.244.3.1/24": not a network address (10.244.3.0/24)`},
		{"two IPv4", node("", "10.244.3.0/24", "10.245.3.0/24"), "two of one family"},
		{"three", node("", "10.244.3.0/24", "fd00::/64", "10.1.0.0/16"), "at most two"},
		{"mapped", node("", "::ffff:10.244.3.0/120"), "plain IPv4 or IPv6"},
		{"podCIDR differs", node("10.244.4.0/24", "10.244.3.0/24"), `spec.podCIDR "10.244.4.0/24" is not spec.podCIDRs[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodCIDRs(tc.node)
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %q, want %q", err, tc.want)
				}
				if tc.name == "none" && !errors.Is(err, ErrNoPodCIDR) {
					t.Fatalf("error %v does not wrap ErrNoPodCIDR", err)
				}
				return
			}
			if strings.Join(s, ",") != tc.want {
				t.Fatalf("CIDRs %v, want %s", s, tc.want)
			}
		})
	}
}

func TestValidateNodeName(t *testing.T) {
	if err := ValidateNodeName("node-1.example"); err != nil {
		t.Errorf("valid name: %v", err)
	}
	for _, bad := range []string{"", "Node1", "node_1", "-node", strings.Repeat("n", 254)} {
		if err := ValidateNodeName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The conflist of a Node: its pod CIDRs as the plugin's subnets, in the
// version its runtime takes.
func TestNodeConfList(t *testing.T) {
	n := node("192.168.1.0/24", "192.168.1.0/24", "fd00:192:168:1::/64")
	n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.6.20"
	b, version, reason, err := NodeConfList(n, VersionAuto)
	if err != nil {
		t.Fatal(err)
	}
	if version != "1.0.0" || !strings.Contains(reason, "containerd 1.6") {
		t.Errorf("version %s (%s), want 1.0.0 for containerd 1.6", version, reason)
	}
	for _, want := range []string{`"cniVersion": "1.0.0"`, `"192.168.1.0/24",`, `"fd00:192:168:1::/64"`, `"type": "svcnet"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("conflist lacks %s:\n%s", want, b)
		}
	}
	n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://2.4.2"
	if b, _, _, _ = NodeConfList(n, VersionAuto); !strings.Contains(string(b), `"cniVersion": "1.1.0"`) {
		t.Errorf("containerd 2.4.2: conflist\n%s\nwant cniVersion 1.1.0", b)
	}
	if _, _, _, err := NodeConfList(node("", "10.244.3.1/24"), VersionAuto); err == nil || !strings.Contains(err.Error(), "node node1") {
		t.Errorf("bad podCIDR: error %v, want one naming the node", err)
	}
}

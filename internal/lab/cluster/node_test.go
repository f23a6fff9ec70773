package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// A dual-stack lab's Node has a pod CIDR and an InternalIP of each family,
// IPv4 first, spec.podCIDR the first; an IPv6 lab's has IPv6 ones only.
func TestNodeFamilies(t *testing.T) {
	for family, want := range map[string][2][]string{
		topology.StackDual: {{"192.168.2.0/24", "fd00:192:168:2::/64"}, {"InternalIP 172.26.236.178", "InternalIP fd00:26:236::b2", "Hostname node2"}},
		topology.StackIPv6: {{"fd00:192:168:2::/64"}, {"InternalIP fd00:26:236::b2", "Hostname node2"}},
	} {
		s, err := topology.ParseStack(family)
		if err != nil {
			t.Fatal(err)
		}
		n := Node(s, 2)
		var addrs []string
		for _, a := range n.Status.Addresses {
			addrs = append(addrs, string(a.Type)+" "+a.Address)
		}
		if d := cmp.Diff(want, [2][]string{n.Spec.PodCIDRs, addrs}); d != "" {
			t.Errorf("%s: pod CIDRs and addresses (-want +got):\n%s", family, d)
		}
		if n.Spec.PodCIDR != want[0][0] {
			t.Errorf("%s: spec.podCIDR %s, want %s", family, n.Spec.PodCIDR, want[0][0])
		}
		if n.Status.Addresses[len(n.Status.Addresses)-1].Type != corev1.NodeHostName {
			t.Errorf("%s: no Hostname address last", family)
		}
	}
}

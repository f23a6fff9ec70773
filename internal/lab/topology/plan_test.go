package topology

import (
	"testing"
)

func TestPlan(t *testing.T) {
	for i, want := range map[int]string{1: "172.26.236.177", 3: "172.26.236.179", 4: "172.26.236.200", MaxNodes: "172.26.236.253"} {
		if got := NodeAddr(i).String(); got != want {
			t.Errorf("NodeAddr(%d) = %s, want %s", i, got, want)
		}
	}
	if got := PodCIDR(2).String(); got != "192.168.2.0/24" {
		t.Errorf("PodCIDR(2) = %s", got)
	}
	if got := Gateway4(2).String(); got != "192.168.2.1" {
		t.Errorf("Gateway4(2) = %s", got)
	}
	for name, want := range map[string]int{"node1": 1, "node12": 12, "node": 0, "node01": 0, "client": 0, "node-1": 0} {
		if got := NodeIndex(name); got != want {
			t.Errorf("NodeIndex(%q) = %d, want %d", name, got, want)
		}
	}
	for _, ok := range []string{"svcnet", "e2e123-kube", "a"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "-a", "A", "a_b", "abcdefghijabcdefghijabcdefghijabc"} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("ValidateName(%q) accepted", bad)
		}
	}
	n := Names{Lab: "x"}
	if !n.Owns(n.Pod("default", "p")) || !n.Owns(n.Node(1)) || (Names{Lab: "x-2"}).Owns(n.Node(1)) || n.Owns("x-2.node1") {
		t.Error("Owns must tell one lab's namespaces from another's")
	}
}

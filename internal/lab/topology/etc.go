package topology

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DNSZone is the cluster domain every pod's resolv.conf searches.
const DNSZone = "cluster.local"

// A node's resolv.conf names the cluster DNS, as a node that resolves
// cluster names is configured: nameserver ClusterDNS, with the search path
// of a hostNetwork pod of namespace default with dnsPolicy
// ClusterFirstWithHostNet, so that a short name means from a node what it
// means from a pod in default. The client has none: it stands outside the
// cluster.

// ClusterResolvConf is the resolv.conf the kubelet writes for a pod of
// namespace ns with dnsPolicy ClusterFirst (or a hostNetwork one with
// ClusterFirstWithHostNet): one nameserver per cluster DNS address (the
// kubelet's clusterDNS list; kube-dns's ClusterIPs), the primary family's first.
func ClusterResolvConf(ns string, dns []netip.Addr) string {
	var b strings.Builder
	fmt.Fprintf(&b, "search %s.svc.%s svc.%s %s\n", ns, DNSZone, DNSZone, DNSZone)
	for _, a := range dns {
		fmt.Fprintf(&b, "nameserver %s\n", a)
	}
	b.WriteString("options ndots:5\n")
	return b.String()
}

// ResolvConfPath is the resolv.conf `ip netns exec` binds for namespace
// nsName, and the one the lab resolves that place's names with.
func ResolvConfPath(nsName string) string { return filepath.Join(EtcNetns, nsName, "resolv.conf") }

// WriteNodeEtc writes node i's resolv.conf (see above) in a lab of stack s.
func WriteNodeEtc(n Names, s Stack, i int) error {
	p := ResolvConfPath(n.Node(i))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("node %s: %w", NodeName(i), err)
	}
	if err := os.WriteFile(p, []byte(ClusterResolvConf(metav1.NamespaceDefault, s.ClusterDNS())), 0o644); err != nil {
		return fmt.Errorf("node %s: %w", NodeName(i), err)
	}
	return nil
}

package topology

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/dns/resolv"
)

// The file a pod and a node resolve with is the kubelet's ClusterFirst
// resolv.conf of their namespace (default for a node).
// In an IPv6 lab it names fd00:96::a; in a dual-stack one both cluster DNS
// addresses, the primary (IPv4) first, as the kubelet writes its clusterDNS list.
func TestClusterResolvConf(t *testing.T) {
	for family, servers := range map[string][]string{
		StackIPv4: {"10.96.0.10:53"},
		StackIPv6: {"[fd00:96::a]:53"},
		StackDual: {"10.96.0.10:53", "[fd00:96::a]:53"},
	} {
		s, err := ParseStack(family)
		if err != nil {
			t.Fatal(err)
		}
		got, err := resolv.ParseConfig(strings.NewReader(ClusterResolvConf("other", s.ClusterDNS())))
		if err != nil {
			t.Fatal(err)
		}
		want := resolv.Config{Nameservers: servers,
			Search: []string{"other.svc.cluster.local.", "svc.cluster.local.", "cluster.local."},
			Ndots:  5, Timeout: 5 * time.Second, Attempts: 2}
		if d := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Dial" }, cmp.Ignore())); d != "" {
			t.Errorf("%s: config (-want +got):\n%s", family, d)
		}
	}
}

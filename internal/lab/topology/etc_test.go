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
func TestClusterResolvConf(t *testing.T) {
	got, err := resolv.ParseConfig(strings.NewReader(ClusterResolvConf("other")))
	if err != nil {
		t.Fatal(err)
	}
	want := resolv.Config{Nameservers: []string{"10.96.0.10:53"},
		Search: []string{"other.svc.cluster.local.", "svc.cluster.local.", "cluster.local."},
		Ndots:  5, Timeout: 5 * time.Second, Attempts: 2}
	if d := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Dial" }, cmp.Ignore())); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
}

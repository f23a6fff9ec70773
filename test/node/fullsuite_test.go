//go:build conformance

package node

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/conformance"
	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

// The side-by-side run takes about an hour, so it is built only with the tag
// conformance (`make conformance`); `make test` runs the [Conformance] specs
// on svcnet alone, in TestSvcnet.

// differencesFile lists every spec that does not pass on both sides.
const differencesFile = "conformance/differences.md"

// TestConformance is `make conformance`: Kubernetes' own sig-network suite
// (conformance.Network: every [sig-network] spec that is not [Disruptive],
// [Feature:…], [Flaky] or provider-specific; [Serial] ones in a second pass)
// on two fresh 3-node clusters in turn, one networked by svcnet (proxy, dns,
// cni, lb) and one by upstream kube-proxy + CoreDNS on svcnet's CNI. It
// prints each spec's two outcomes and the two summary lines, and fails on a
// spec that does not pass on both sides and is not in differences.md with
// exactly its outcomes, on a stale entry there, on a spec svcnet fails that
// kube-proxy + CoreDNS pass, and on fewer passes for svcnet.
func TestConformance(t *testing.T) {
	nodetest.RequireTier(t)
	known := readDifferences(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*suiteTimeout+time.Hour)
	defer cancel()
	images := allImages(t)

	var svcnet, upstream []conformance.Result
	t.Run("svcnet", func(t *testing.T) {
		c := nodetest.Up(t, ctx, nodecluster.Options{Images: images})
		deploySvcnet(t, ctx, c)
		svcnet = runSuite(t, ctx, c, conformance.SideSvcnet, conformance.Network)
	})
	t.Run("kube-proxy+coredns", func(t *testing.T) {
		c := nodetest.Up(t, ctx, nodecluster.Options{Images: images})
		deployUpstream(t, ctx, c)
		upstream = runSuite(t, ctx, c, conformance.SideUpstream, conformance.Network)
	})
	if svcnet == nil || upstream == nil {
		t.Fatal("a side did not run")
	}
	v := conformance.Compare(svcnet, upstream, known)
	var out strings.Builder
	_ = v.Write(&out, true)
	fmt.Print(out.String()) // the run's result, also without -v
	for _, p := range v.Problems {
		t.Error(p)
	}
}

// readDifferences reads the checked-in list of known differences.
func readDifferences(t *testing.T) []conformance.Entry {
	t.Helper()
	f, err := os.Open(differencesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	es, err := conformance.ParseDifferences(f, differencesFile)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

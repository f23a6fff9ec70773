package cni_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	nftnl "github.com/svcnet/svcnet/internal/nft/netlink"
)

// ADD with hostPorts probes the kernel's nftables features first and leaves
// no probe table behind: the node holds the hostport tables only. The
// probe's cost per ADD is logged (median of 21 runs), next to that of the
// whole checklist.
func TestAddProbesHostPortFeatures(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	l.add(l.newPod(), portMappings(pm(8080, 80, "tcp")))
	tables := strings.TrimSpace(sh(t, l.node, "nft", "list", "tables"))
	if want := "table ip " + hostport.TableName + "\ntable ip6 " + hostport.TableName; tables != want {
		t.Errorf("node tables after ADD:\n%s\nwant:\n%s", tables, want)
	}
	c, err := nftnl.New(l.node)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	both := []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	median := func(probe func() error) time.Duration {
		var ds []time.Duration
		for range 21 {
			start := time.Now()
			if err := probe(); err != nil {
				t.Fatalf("probe: %v", err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	hp := median(func() error { return hostport.NewManager(c).Probe(ctx, both) })
	all := median(func() error { return nft.Probe(ctx, c, both, nft.Examples()) })
	t.Logf("probe, both families, median of 21: hostport's %d examples %v, all %d examples %v",
		len(hostport.Examples()), hp, len(nft.Examples()), all)
	if after := strings.TrimSpace(sh(t, l.node, "nft", "list", "tables")); after != tables {
		t.Errorf("node tables after probing:\n%s\nwant:\n%s", after, tables)
	}
}

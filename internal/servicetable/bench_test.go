package servicetable

import (
	"fmt"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
)

// BenchmarkBuild10k builds the table of docs/reference.md's scale test: 10,000
// selector-less Services, one TCP port each, one slice of 2 ready endpoints.
func BenchmarkBuild10k(b *testing.B) {
	const n = 10000
	svcs := make([]*model.Service, 0, n)
	sls := make([]*model.EndpointSlice, 0, n)
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		svcs = append(svcs, svc(name, withClusterIPs(fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))))
		sls = append(sls, httpSlice(name, name+"-1",
			mep(fmt.Sprintf("192.168.%d.%d", i/250, i%250+1), "node1", "zone-a", ready),
			mep(fmt.Sprintf("192.169.%d.%d", i/250, i%250+1), "node2", "zone-b", ready)))
	}
	snap, cfg := model.SnapshotOf(svcs, sls), testNode()
	b.ReportAllocs()
	for b.Loop() {
		if tbl := Build(snap, cfg); len(tbl.Ports) != n {
			b.Fatalf("%d entries", len(tbl.Ports))
		}
	}
}

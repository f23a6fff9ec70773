package speaker

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"

	"github.com/svcnet/svcnet/internal/logtest"
)

// labNode is node i of the lab: InternalIPs 172.26.236.(176+i) and
// fd00:26:236::(176+i), pod CIDR 192.168.i.0/24.
func labNode(i int, ready bool, labels ...string) *model.Node {
	n := &model.Node{
		Name:  fmt.Sprintf("node%d", i),
		Ready: ready,
		Addresses: []model.NodeAddress{
			{Type: "InternalIP", Address: fmt.Sprintf("172.26.236.%d", 176+i)},
			{Type: "InternalIP", Address: fmt.Sprintf("fd00:26:236::%d", 176+i)},
			{Type: "Hostname", Address: fmt.Sprintf("node%d", i)},
		},
		Labels: map[string]string{},
	}
	for _, l := range labels {
		n.Labels[l] = ""
	}
	return n
}

// lbSvc is default/name of type LoadBalancer, no class, with the given ingress IPs.
func lbSvc(name string, etp model.TrafficPolicy, ingress ...string) *model.Service {
	svc := &model.Service{Namespace: "default", Name: name, Type: model.ServiceTypeLoadBalancer, ExternalTrafficPolicy: etp,
		Ports: []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80, TargetPort: 8080}}}
	for _, ip := range ingress {
		svc.LoadBalancerIngress = append(svc.LoadBalancerIngress, model.LoadBalancerIngress{IP: netip.MustParseAddr(ip), IPMode: model.IPModeVIP})
	}
	return svc
}

// ep is one endpoint: a pod address on a node.
type ep struct {
	node, addr string
	ready      bool
}

// slice is the EndpointSlice default/<svc>-<family> holding eps.
func slice(svc string, eps ...ep) *model.EndpointSlice {
	sl := &model.EndpointSlice{Namespace: "default", Name: svc + "-abc", Service: svc, AddressType: ipfamily.IPv4,
		Ports: []model.EndpointPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}}}
	for _, e := range eps {
		a := netip.MustParseAddr(e.addr)
		if a.Is6() {
			sl.AddressType = ipfamily.IPv6
			sl.Name = svc + "-v6"
		}
		sl.Endpoints = append(sl.Endpoints, model.Endpoint{Addresses: []netip.Addr{a}, Ready: e.ready, Serving: e.ready, NodeName: e.node})
	}
	return sl
}

// snapshot returns a synced snapshot holding what fn writes.
func snapshot(fn func(tx *model.Txn)) *model.Snapshot {
	st := model.NewStore()
	st.Update(func(tx *model.Txn) {
		fn(tx)
		tx.SetSynced(true)
	})
	return st.Snapshot()
}

// threeNodes writes node1..node3, all Ready.
func threeNodes(tx *model.Txn) {
	for i := 1; i <= 3; i++ {
		tx.SetNode(labNode(i, true))
	}
}

// refOwner is MetalLB's ordering written independently: sort by
// sha256(node + "#" + ip), take the first.
func refOwner(ip string, nodes ...string) string {
	if len(nodes) == 0 {
		return ""
	}
	ns := append([]string(nil), nodes...)
	sort.SliceStable(ns, func(i, j int) bool {
		hi := sha256.Sum256([]byte(ns[i] + "#" + ip))
		hj := sha256.Sum256([]byte(ns[j] + "#" + ip))
		return bytes.Compare(hi[:], hj[:]) < 0
	})
	return ns[0]
}

// logSink collects log lines for assertions.
type logSink struct{ logtest.Sink }

func (l *logSink) logger() logr.Logger { return l.Logger(2) }

func (l *logSink) count(substrs ...string) int { return l.Count(substrs...) }

// eventually polls cond every 5 ms until it holds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for range 100_000 {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, limit)
}

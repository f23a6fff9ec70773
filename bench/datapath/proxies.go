package datapathbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	iptplane "github.com/svcnet/svcnet/internal/dataplane/iptables"
	"github.com/svcnet/svcnet/internal/dataplane/userspace"
	"github.com/svcnet/svcnet/internal/lab/cluster"
)

// The measured Service proxies (the report's columns) beyond the lab's own
// (cluster.Proxies): svcnet proxy on its other data planes. ProxySvcnet is
// svcnet proxy on its default plane, nftables.
const (
	proxySvcnetIPTables  = "svcnet-iptables"  // svcnet proxy --data-plane iptables
	proxySvcnetUserspace = "svcnet-userspace" // svcnet proxy --data-plane userspace
	proxySvcnetEBPF      = "svcnet-ebpf"      // svcnet proxy --data-plane ebpf
)

// benchProxy is one measured Service proxy: the lab's node proxy and svcnet
// proxy's data plane ("" for its default).
type benchProxy struct {
	name      string
	labProxy  string
	dataPlane string
	about     string // for the report's header
}

// allProxies are the proxies a run can measure, in the order of its rounds
// (schedule): svcnet's iptables plane next to kube-proxy's iptables mode,
// which it is compared with, so that a drift of the machine falls on both
// alike.
var allProxies = []benchProxy{
	{cluster.ProxySvcnet, cluster.ProxySvcnet, "", "svcnet proxy, its default nftables plane"},
	{proxySvcnetEBPF, cluster.ProxySvcnet, ebpfplane.Name, "svcnet proxy --data-plane ebpf: connects from node1's cgroup (the pod paths' load generator joins it) " +
		"translated at the socket, no NAT; the NodePort and LB paths meet its nftables rules"},
	{cluster.ProxyKubeProxyNFTables, cluster.ProxyKubeProxyNFTables, "", "upstream kube-proxy --proxy-mode nftables"},
	{cluster.ProxyKubeProxyIPTables, cluster.ProxyKubeProxyIPTables, "", "upstream kube-proxy --proxy-mode iptables"},
	{proxySvcnetIPTables, cluster.ProxySvcnet, iptplane.Name, "svcnet proxy --data-plane iptables"},
	{proxySvcnetUserspace, cluster.ProxySvcnet, userspace.Name, "svcnet proxy --data-plane userspace: a proxy port per Service port on the node, " +
		"every path's traffic redirected to it and spliced to a second connection, from the node's address"},
}

// proxyNamed returns the proxy of allProxies called name.
func proxyNamed(name string) (benchProxy, bool) {
	i := slices.IndexFunc(allProxies, func(p benchProxy) bool { return p.name == name })
	if i < 0 {
		return benchProxy{}, false
	}
	return allProxies[i], true
}

// proxyNames are the names of allProxies, in order.
func proxyNames() []string {
	out := make([]string, len(allProxies))
	for i, p := range allProxies {
		out[i] = p.name
	}
	return out
}

// parseProxies parses SVCNET_BENCH_PROXIES: names of allProxies separated by
// commas, returned in allProxies' order without duplicates.
func parseProxies(v string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(v, ",") {
		name := strings.TrimSpace(f)
		if _, ok := proxyNamed(name); !ok {
			return nil, fmt.Errorf("proxy %q: want some of %s", name, strings.Join(proxyNames(), ", "))
		}
		want[name] = true
	}
	var out []string
	for _, p := range allProxies {
		if want[p.name] {
			out = append(out, p.name)
		}
	}
	return out, nil
}

// runLimitPerProxy bounds the whole run per proxy measured: the default
// run's 3 counts x 3 rounds give each proxy 9 slots (1.8 minutes of load at
// 200ms) and about 3 swaps at 10k Services (kube-proxy iptables' first
// sync there takes about 40 s), beside its share of the lab and of the
// fillers' apply. On the shared machine, loaded by others, the five
// proxies' 1 and 1000 Services took 9 minutes, and 10k fillers 7.5.
const runLimitPerProxy = 6 * time.Minute

// runLimit bounds a run measuring n proxies: 18 minutes for up to three,
// 36 for all six.
func runLimit(n int) time.Duration { return time.Duration(max(n, 3)) * runLimitPerProxy }

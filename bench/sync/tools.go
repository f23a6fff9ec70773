package syncbench

import (
	"os"
	"strings"
	"time"
)

// Both proxies run with the same node name, health and metrics addresses (inside
// their own namespaces) and log level, and otherwise with their defaults
// (min-sync-period 1s, sync-period 30s for both).
const (
	nodeName       = "node1"
	healthzAddr    = "127.0.0.1:10256"
	metricsAddr    = "127.0.0.1:10249"
	defaultMinSync = time.Second
)

// profilingFlag serves /debug/pprof on the metrics address (svcnet; added
// only when EnvProfile asks for profiles).
const profilingFlag = "--profiling"

// svcnetFrontends is svcnet's nftables layout: map service-ips, sharded over
// table svcnet and tables svcnet-nat-*.
var svcnetFrontends = Frontends{Tables: TableMatch{Name: "svcnet", Prefix: "svcnet-nat-"}, Set: ServiceIPsMap}

// Svcnet runs `svcnet proxy` from bin (with --profiling when EnvProfile is
// set, and with the environment EnvSvcnetEnv adds).
func Svcnet(bin string) Tool { return svcnetTool(bin, ToolSvcnet, "sv", svcnetFrontends) }

// SvcnetIPTables runs `svcnet proxy --data-plane iptables` from bin, as Svcnet
// otherwise. Its rules are kube-proxy's iptables layout, written with
// iptables-nft-restore (the host's iptables is the nf_tables variant).
func SvcnetIPTables(bin string) Tool {
	return svcnetTool(bin, ToolSvcnetIPTables, "si", IPTablesFrontends, "--data-plane", "iptables")
}

// SvcnetEBPF runs `svcnet proxy --data-plane ebpf` from bin, as Svcnet
// otherwise, its socket load balancer attached to a child cgroup of the
// benchmark's (Tool.Sockets). A change is in the kernel when its ClusterIP is
// in the nftables rules' map and in the socket load balancer's services map
// (which the plane writes after the rules).
func SvcnetEBPF(bin string) Tool {
	t := svcnetTool(bin, ToolSvcnetEBPF, "se", svcnetFrontends, "--data-plane", "ebpf")
	t.Sockets = true
	return t
}

// ToolSvcnetB is a second svcnet build (EnvSvcnetB), for A/B comparisons of
// two builds on one population: list the tools alternately
// (svcnet,svcnet-b,svcnet,svcnet-b) to spread the drift of a shared machine.
// It has no targets; the table shows its rows. (A repeated tool's log and
// profiles replace those of its earlier run.)
const ToolSvcnetB = "svcnet-b"

// EnvSvcnetB is the path of the svcnet-b binary.
const EnvSvcnetB = "SVCNET_BENCH_SVCNET_B"

// SvcnetB runs `svcnet proxy` from bin as tool svcnet-b.
func SvcnetB(bin string) Tool { return svcnetTool(bin, ToolSvcnetB, "sb", svcnetFrontends) }

func svcnetTool(bin, name, short string, where Frontends, extra ...string) Tool {
	profile := profileEnabled()
	env := strings.Fields(os.Getenv(EnvSvcnetEnv))
	return Tool{
		Name: name, Short: short, Frontends: where, MinSyncPeriod: defaultMinSync,
		Argv: func(kc string) []string {
			var argv []string
			if len(env) > 0 {
				// env execs the proxy in place: the pid stays the proxy's.
				argv = append([]string{"env"}, env...)
			}
			argv = append(argv, bin, "proxy", "--kubeconfig", kc, "--hostname-override", nodeName,
				"--healthz-bind-address", healthzAddr, "--metrics-bind-address", metricsAddr, "--v=2")
			if profile {
				argv = append(argv, profilingFlag)
			}
			return append(argv, extra...)
		},
	}
}

// KubeProxy runs upstream kube-proxy from bin in nftables mode.
func KubeProxy(bin string) Tool {
	return kubeProxyTool(bin, ToolKubeProxy, "kp", "nftables",
		Frontends{Tables: TableMatch{Name: "kube-proxy"}, Set: ServiceIPsMap})
}

// KubeProxyIPTables runs upstream kube-proxy from bin in iptables mode; it
// runs the iptables in PATH, the nf_tables variant on this host.
func KubeProxyIPTables(bin string) Tool {
	return kubeProxyTool(bin, ToolKubeProxyIPTables, "ki", "iptables", IPTablesFrontends)
}

// kubeProxyTool runs kube-proxy in mode. Inside a network namespace the
// conntrack sysctls are read-only: --conntrack-max-per-core=0 leaves them
// alone.
func kubeProxyTool(bin, name, short, mode string, where Frontends) Tool {
	return Tool{
		Name: name, Short: short, Frontends: where, MinSyncPeriod: defaultMinSync,
		Argv: func(kc string) []string {
			return []string{bin, "--kubeconfig", kc, "--proxy-mode", mode, "--hostname-override", nodeName,
				"--conntrack-max-per-core=0", "--healthz-bind-address", healthzAddr, "--metrics-bind-address", metricsAddr, "--v=2"}
		},
	}
}

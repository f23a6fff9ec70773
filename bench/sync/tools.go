package syncbench

import "time"

// Both proxies run with the same node name, health and metrics addresses (inside
// their own namespaces) and log level, and otherwise with their defaults
// (min-sync-period 1s, sync-period 30s for both).
const (
	nodeName       = "node1"
	healthzAddr    = "127.0.0.1:10256"
	metricsAddr    = "127.0.0.1:10249"
	defaultMinSync = time.Second
)

// Svcnet runs `svcnet proxy` from bin.
func Svcnet(bin string) Tool {
	return Tool{
		Name: ToolSvcnet, Short: "sv", Tables: TableMatch{Name: "svcnet", Prefix: "svcnet-nat-"}, MinSyncPeriod: defaultMinSync,
		Argv: func(kc string) []string {
			return []string{bin, "proxy", "--kubeconfig", kc, "--hostname-override", nodeName,
				"--healthz-bind-address", healthzAddr, "--metrics-bind-address", metricsAddr, "--v=2"}
		},
	}
}

// KubeProxy runs upstream kube-proxy from bin in nftables mode. Inside a network
// namespace the conntrack sysctls are read-only: --conntrack-max-per-core=0
// leaves them alone.
func KubeProxy(bin string) Tool {
	return Tool{
		Name: ToolKubeProxy, Short: "kp", Tables: TableMatch{Name: "kube-proxy"}, MinSyncPeriod: defaultMinSync,
		Argv: func(kc string) []string {
			return []string{bin, "--kubeconfig", kc, "--proxy-mode", "nftables", "--hostname-override", nodeName,
				"--conntrack-max-per-core=0", "--healthz-bind-address", healthzAddr, "--metrics-bind-address", metricsAddr, "--v=2"}
		},
	}
}

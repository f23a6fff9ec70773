// Package syncbench measures how fast svcnet proxy programs Service rules into
// the kernel, against upstream kube-proxy, on one real control plane
// (internal/kubetest) in one run. `make bench-sync` runs TestBenchSync (gated
// by SVCNET_BENCH=1; without it the test skips, so `make test` only runs the
// unit and kernel tests of the harness itself).
//
// Tools (SVCNET_BENCH_TOOLS), compared in pairs of the same rule layout:
//
//   - svcnet (svcnet proxy, nftables plane) against kube-proxy
//     (--proxy-mode nftables): the default pair;
//   - svcnet-ebpf (svcnet proxy --data-plane ebpf: the socket load balancer
//     over the nftables plane's rules, attached to a child cgroup the run
//     makes) against kube-proxy too: its change is in the kernel when its
//     ClusterIP is in the rules' map and in the socket load balancer's
//     services map (SocketWait polls it after the rules' event; the plane
//     writes it right after the rules' commit). Not in the default:
//     SVCNET_BENCH_TOOLS=svcnet,svcnet-ebpf,kube-proxy;
//   - svcnet-iptables (svcnet proxy --data-plane iptables) against
//     kube-proxy-iptables (--proxy-mode iptables, the same binary), both
//     through iptables-nft-restore, the host's iptables being the nf_tables
//     variant. Not in the default: kube-proxy's iptables mode writes its
//     whole ruleset in one iptables-nft-restore, whose time grows about as
//     the square of the ruleset (first sync 0.34s at 1k and 189s at 10k
//     Services on the shared 2-core machine under load, 40s at 10k on a quiet
//     one in docs/reference.md; one restore of such a ruleset took 11s of CPU
//     at 5k), so at 30k its first sync alone would take some 5 minutes on a
//     quiet machine and several times that under load (extrapolated), with
//     seconds per change after it. Run the pair as
//     SVCNET_BENCH_TOOLS=svcnet-iptables,kube-proxy-iptables SVCNET_BENCH_SIZES=1000,10000 make bench-sync
//     (svcnet-iptables alone at 30k fits);
//   - svcnet-file and svcnet-file-warm (svcnet proxy --state, the embedded
//     default) against svcnet: the same proxy on a manifest of the
//     population, written as the lab publishes a cluster (see SvcnetFile),
//     started cold and as a restarted agent. A change replaces the manifest
//     with one more Service (created in the apiserver first, for its
//     ClusterIP); its latency runs from the rename. Not in the default:
//     SVCNET_BENCH_TOOLS=svcnet,svcnet-file,svcnet-file-warm.
//
// For each size N (Services, one TCP port and one EndpointSlice of 2 ready
// endpoints each), the tools run one after the other against the same
// apiserver state, each in a fresh network namespace of its own that reaches
// the apiserver through netns.Forward. For each it measures:
//
//   - full sync: the elapsed= of the proxy's first full "SyncProxyRules complete"
//     log line (v=2; svcnet: full=true; kube-proxy: its first IPv4 sync, always a
//     full one), that is the proxy's own timing of building and writing every
//     rule once its informers have synced. "ready" is the wall time from process
//     start to that log line (informer lists included).
//   - change latency: from just before the Create call of one new Service (whose
//     EndpointSlice already exists, so the Service is the only change) to the
//     moment its frontend reaches a netlink monitor of nf_tables events in the
//     proxy's namespace: in the nftables layout the NFT_MSG_NEWSETELEM event of
//     its ClusterIP in map service-ips of the proxy's tables; in the iptables
//     layout the NFT_MSG_NEWRULE event of its rule in chain KUBE-SERVICES of
//     table ip nat, the one iptables-nft makes of `-d <ClusterIP>/32 --dport
//     <port> -j KUBE-SVC-…` (payload and cmp of the destination address, a
//     jump; see RuleEvent). Both iptables tools are observed identically; the
//     rule arrives in the same transaction as the Service's KUBE-SVC and
//     KUBE-SEP chains, so its event marks the whole Service programmed.
//     Changes are serial and spaced: the next Service is created
//     min-sync-period + 200ms after the log line of the sync that wrote the
//     previous one's element (kube-proxy counts its min-sync-period from the
//     end of a sync, svcnet from the start), and the first one as long after
//     the full sync's line, so each change finds the gate open unless the tool
//     synced on its own in between (svcnet's periodic sync, every
//     --sync-period). Every tool runs with its defaults: --min-sync-period 1s,
//     --sync-period 30s (kube-proxy's nftables mode uses it only as a retry
//     interval; it resyncs on its own hourly; its iptables mode syncs every
//     30s).
//   - RSS: VmRSS of the proxy process after its full sync and again after the
//     last change, and its VmHWM (peak) at the end. With SVCNET_BENCH_PROFILE
//     set (and SVCNET_BENCH_LOGDIR to keep them), each of those readings also
//     saves svcnet's heap profile, /metrics and /proc status beside its log
//     (see EnvProfile; SVCNET_BENCH_SVCNET_ENV=GODEBUG=memprofilerate=1 makes
//     them exact).
//
// Contract: nothing is created in the host's network namespace (loopback
// sockets of the control plane and the forwarders only); every process and
// namespace the benchmark starts is removed when the test ends, pass or fail;
// every wait is bounded.
package syncbench

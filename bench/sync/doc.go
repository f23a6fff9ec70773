// Package syncbench measures how fast svcnet proxy programs Service rules into
// the kernel, against upstream kube-proxy in nftables mode, on one real control
// plane (internal/kubetest) in one run. `make bench-sync` runs TestBenchSync
// (gated by SVCNET_BENCH=1; without it the test skips, so `make test` only runs
// the unit and kernel tests of the harness itself).
//
// For each size N (Services, one TCP port and one EndpointSlice of 2 ready
// endpoints each), svcnet and then kube-proxy run one after the other against
// the same apiserver state, each in a fresh network namespace of its own that
// reaches the apiserver through netns.Forward. For each it measures:
//
//   - full sync: the elapsed= of the proxy's first full "SyncProxyRules complete"
//     log line (v=2; svcnet: full=true; kube-proxy: its first IPv4 sync, always a
//     full one), that is the proxy's own timing of building and writing every
//     rule once its informers have synced. "ready" is the wall time from process
//     start to that log line (informer lists included).
//   - change latency: from just before the Create call of one new Service (whose
//     EndpointSlice already exists, so the Service is the only change) to the
//     moment an NFT_MSG_NEWSETELEM event for its ClusterIP in map service-ips of
//     the proxy's table reaches a netlink monitor in the proxy's namespace.
//     Changes are serial and spaced: the next Service is created
//     min-sync-period + 200ms after the log line of the sync that wrote the
//     previous one's element (kube-proxy counts its min-sync-period from the
//     end of a sync, svcnet from the start), and the first one as long after
//     the full sync's line, so each change finds the gate open unless the tool
//     synced on its own in between (svcnet's periodic sync, every
//     --sync-period). Both tools run with their defaults: --min-sync-period 1s,
//     --sync-period 30s (kube-proxy's nftables mode uses it only as a retry
//     interval; it resyncs on its own hourly).
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

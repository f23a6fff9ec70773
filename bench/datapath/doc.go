// Package datapathbench measures Service traffic through svcnet proxy, on
// its nftables, eBPF, iptables and userspace data planes, and through upstream
// kube-proxy, in nftables and iptables modes, against direct pod traffic in
// the lab (make bench-datapath). TestBenchDatapath is gated by
// SVCNET_BENCH=1 (bench/benchenv); it runs the svcnet binary
// SVCNET_BENCH_SVCNET names (else one built from this tree) and
// kube-apiserver, kube-controller-manager and kube-proxy from SVCNET_K8S_BIN
// (else tools/k8s/build.sh builds them, cached). SVCNET_BENCH_PROXIES
// chooses the proxies (default all six: svcnet, svcnet-ebpf,
// kube-proxy-nftables, kube-proxy-iptables, svcnet-iptables,
// svcnet-userspace; proxies.go).
//
// The pod paths' load generator is this process: for them it joins node1's
// cgroup (cgroup.Enter) for each pair, both sides, whatever the proxy, so
// that the eBPF plane's socket load balancer, attached there, sees its
// connects as those of a pod on node1 (on the other planes the cgroup
// changes nothing). The external paths' load stays outside every node's
// cgroup, as an external client is.
//
// A 2-node lab on the kube control plane (real etcd, kube-apiserver and
// kube-controller-manager; SVCNET_BENCH_LAB names it, default dpPID) runs
// three echo pods: srv-remote on node2, srv-local and the client pod cli on
// node1. Service target (type LoadBalancer, port 80) selects srv-remote only,
// so every path ends at the same pod; Service target-local (ClusterIP)
// selects srv-local. The paths, each measured against a direct reference in
// the same slot:
//
//	path              from          to                          direct reference
//	clusterip-remote  pod cli       ClusterIP of target         cli -> srv-remote pod IP
//	clusterip-local   pod cli       ClusterIP of target-local   cli -> srv-local pod IP
//	nodeport          lab client    node1 IP : NodePort(target) client -> srv-remote pod IP via node1
//	loadbalancer      lab client    LB IP of target             client -> srv-remote pod IP via node1
//
// The lab's external client does not route to pod IPs, so for the reference
// of NodePort and LoadBalancer it gets a second address, 172.26.236.11, and
// a host route to srv-remote via node1 from it, and node2 routes that
// address back via node1 (reference.go): the reference crosses the same
// hops as the NodePort path (client, node1, node2, pod) and both directions
// cross node1, with no Service rule. The LoadBalancer path enters at the IP's
// ARP owner (printed): when that is node2, it has one hop fewer than its
// reference. The smallest count is at least the Services the lab and the
// fixture hold (target, target-local, the probe, the lab's own): "1" is
// reported as that few.
//
// Proxies. The proxies take turns on the same lab, so the pods, the Services
// and the control plane are identical for all (re-creating the lab per proxy
// would re-apply 10,000 Services through the apiserver each time): svcnet
// (svcnet proxy on its default plane, nftables), kube-proxy-nftables and
// kube-proxy-iptables (the lab's node proxies, cluster.Proxies), and
// svcnet-iptables and svcnet-userspace (svcnet proxy --data-plane iptables
// and --data-plane userspace). A swap (lab.SetProxyPlane) stops both nodes'
// agents, removes the old proxy's rules (svcnet proxy --cleanup, which
// cleans every plane, or kube-proxy --cleanup; then the iptables-nft tables
// either iptables proxy leaves), checks that no table or KUBE-* chain of it
// is left, starts the new one (beside kube-proxy, svcnet proxy --data-plane
// none keeps the pod routes and the layer-2 speaker, and programs no table)
// and waits until it has synced. The userspace plane redirects every path
// (ClusterIP, NodePort, the LoadBalancer IP) to a proxy port on the node it
// enters, and its second connection leaves from the node's address: the pod
// sees the node, not the client. Nothing here looks at the address the pod
// sees, so that plane is measured as the others; its proxy runs in the
// node's svcnet proxy, on no pinned CPU. The bench then waits until every path and
// the last probe answer and the LoadBalancer IP is back on its owner node: the
// speakers restart too, and a gratuitous ARP of a node that held the IP for a
// moment can land after the owner's, so a wrong client neighbour entry is
// forgotten and asked again. The time from the start of the swap until then
// is reported per proxy (kube-proxy's first full sync at 10k: about 20 s in
// nftables and 50 s in iptables mode here). Last it waits until the agents
// are quiet (at most 5% of a CPU over a second, bounded by 30 s; the same
// after the fillers of a count are programmed): runs measured while new
// agents still worked after their first sync were slower on every path, the
// direct one included.
//
// Order. A slot is one proxy's turn in one round: each path measured in 3
// pairs, a pair being the direct reference and the Service loaded in turns of
// 25ms (D S S D D S S D ..., the other side first in the second pair) until
// each side had its duration (turns.go): a drift of the machine, even within a
// pair, falls on both sides alike. Each round gives every proxy one slot, in
// serpentine order over the whole run (svcnet, kube-proxy-nftables, kube-proxy-
// iptables, svcnet-iptables, svcnet-userspace, then the reverse, ...): a drift of the machine over time spreads
// evenly over the proxies, and the proxy that ends a round begins the next,
// saving a swap per round boundary. The direct reference is measured
// with the slot's proxy installed (plain pod traffic crosses its rules too);
// each proxy's table shows its own direct figures, and its ratios are to them:
// the median over its pairs of each pair's Service/direct ratio.
//
// Each pair, from a load generator in this process: keep-alive HTTP requests/s
// over 8 connections a side; new connections/s (8 workers: connect, GET, read,
// close from the client's side, so TIME_WAIT is the client's), with
// net.ipv4.tcp_tw_reuse=1 and tcp_max_tw_buckets=4096 written in the lab's
// client namespaces only (load.go: clientSysctls says why); then a connect
// probe, one client connecting and closing back to back with no other load,
// alternating the sides connect by connect, whose connect times give the p50
// and p99 (the connect times under the new-connection load measure the loaded
// machine's queueing more than the path). The sockets are made inside the
// place's network namespace on one locked thread and used from ordinary
// goroutines (sockets.go): with a locked thread per worker, the load
// generator's own thread hand-offs took most of the CPU and made the rates
// swing. While a slot is measured, the load generator runs on the first half
// of the CPUs and the measured pods' servers on the other half (pin.go). Each
// load lasts SVCNET_BENCH_DURATION a side (default 200ms; the probe half as
// long); there are 3 rounds per count.
//
// This is repeated for each Service count of SVCNET_BENCH_COUNTS (default
// "1,1000,10000"): filler ClusterIP Services, selector-less, each with one
// EndpointSlice of 2 endpoints in 10.255.0.0/16, are applied through lab.Apply
// (in batches, each applied by parallel API calls); the apply time and the
// time until both nodes' proxies programmed them (a probe Service applied last
// answers from a pod on each node) are reported and bounded. The targets
// printed as met or MISSED: for svcnet, keep-alive >= 0.97x direct and new
// connections >= 0.95x direct through ClusterIP and NodePort, and connect p99
// at the largest count within 10% of the smallest; and svcnet at least equal
// to kube-proxy nftables on every figure, per count and path: keep-alive and
// new-connection ratios to direct at least kube-proxy's, connect p50 and p99
// over direct at most kube-proxy's (each pair's Service quantile minus its
// direct one: slots of one proxy differ by up to 10us on both sides alike, the
// machine's drift, which an absolute comparison of proxies measured minutes
// apart would judge; the plain pod traffic's own cost of each proxy's rules
// is in its table's direct columns, and per node in the nftables package's
// BenchmarkKernelShardConnect); svcnet-iptables at least equal to kube-proxy
// iptables on the same figures, judged the same way (a family of its own);
// svcnet-userspace's figures relative to direct, with no target (every
// byte crosses user space twice: far below 1). Each ratio target shows the 90% bootstrap interval of its
// median; every path's ratios over all counts together follow, for
// information (an established flow's cost does not depend on the count).
// Each comparison is judged strictly (medians) and by the noise: two
// proxies programming the same nftables NAT are equal, a strict comparison
// of their medians is a coin toss per figure, and 48 figures each judged
// alone at 5% a side would find a "worse" one in most runs. So each figure
// gets a one-sided rank-sum permutation p-value (stats.go), and a figure is
// worse (or better) only where Holm's procedure over all the figures
// rejects "equal" at a family-wise 5%; the target is met when none is
// worse. The bootstrap interval of the difference is printed beside it.
//
// Bounds: the whole run is bounded by 6 minutes a proxy, at least 18 (a
// context over everything; the default run of five proxies has 45 slots of
// 12 pairs of 1s, 9 minutes, under 30, and checkBudget refuses settings
// whose load alone would take over half the bound), each apply, probe, swap
// and settle wait has its own bound.
//
// Contract: everything lives in the lab's namespaces (the client sysctls are
// written only in the lab's client pod and external client namespaces); the lab
// is removed when the test ends, pass or fail; every wait is bounded.
package datapathbench

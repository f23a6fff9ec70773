// Package nftables turns the per-node service table into svcnet's nftables
// tables and keeps the kernel equal to it: per family (ip, ip6) the main
// table `svcnet` (filter chains and their maps, the Service masquerade and
// the egress masquerade of pod traffic leaving the cluster, egress.go) and the Service
// NAT sharded over tables `svcnet-nat-NN` by a hash of the Service port
// (shard.go says why and how many).
//
// Layout (after kube-proxy's nftables mode, without anonymous sets, which the
// kernel handles in O(n²) within one large transaction):
//
//   - verdict maps give O(1) dispatch from a frontend to its chain:
//     service-ips (daddr . proto . port), service-nodeports (proto . port, on
//     @nodeport-ips only), firewall-ips (source ranges), no-endpoint-services
//     and no-endpoint-nodeports (reject or drop);
//   - per Service port: service-* (cluster endpoints), local-* (local
//     endpoints), external-* (NodePort/LB/external IP entry: masquerade or the
//     Local short-circuits), firewall-* (loadBalancerSourceRanges), and one
//     endpoint-* chain per endpoint (hairpin masquerade mark, affinity update,
//     DNAT); endpoint choice is a `numgen random` cascade, 1/N per endpoint;
//   - affinity-* dynamic sets per endpoint for ClientIP session affinity.
//
// Names are a short hash plus the readable identity, so the same table always
// renders byte-identically. Every sync is one atomic transaction per family
// (over all of its tables); a partial sync touches only the objects of
// Service ports that changed, in their shard and the main table.
package nftables

// Package dnsbench measures the query throughput and latency of svcnet dns
// against CoreDNS's kubernetes plugin on the same cluster state, in one run
// (make bench-dns; TestBenchDNS skips unless SVCNET_BENCH is set).
//
// A real kube-apiserver (internal/kubetest) gets N Services (default 10,000:
// selector-less ClusterIP, one TCP port, one EndpointSlice of 2 ready endpoints
// each, created as bench/sync creates them). CoreDNS (tools/coredns, the
// Corefile of internal/dns/difftest: the kubernetes plugin alone, ttl 30, no
// cache) and `svcnet dns` (--ttl 30) both read it, each pinned to CPU 1 with
// taskset; the load generator (Load) runs in the test process, pinned to CPU 0.
// Both servers run throughout. After 4 s of unmeasured load on each, the rounds
// alternate, CoreDNS then svcnet, three times, each a 1 s warm-up and a 10 s
// measurement, so a drift of the machine hits both alike.
//
// The load: several UDP sockets on loopback, each with a fixed number of
// queries in flight (a new one is sent as soon as one is answered), A queries
// for random existing Services and every 50th for a missing name (NXDOMAIN).
// Every answer is checked (rcode, and at least one record for an existing
// name); a wrong answer fails the benchmark, an unanswered query (1 s) counts
// as lost. It prints per server queries/s (answers received in the measured
// seconds), p50 and p99 latency (send to receive, over every answer measured),
// the server's CPU use, and the ratio svcnet/CoreDNS against the target
// (at least 1.0x) as met or missed.
//
// Contract: everything listens on 127.0.0.1; every process started is stopped
// when the test ends, pass or fail; the whole run is bounded (14 minutes by
// default).
package dnsbench

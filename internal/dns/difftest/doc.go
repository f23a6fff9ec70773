// Package difftest compares svcnet dns with CoreDNS's kubernetes plugin, query by
// query, on one real kube-apiserver (the kube test tier), and holds what the DNS
// benchmark (bench/dns) shares with it: finding or building the two binaries and
// running them as processes.
//
// TestDifferential creates a fixture of Services, EndpointSlices and Pods of every
// kind (Fixture), starts CoreDNS (built from github.com/coredns/coredns by
// tools/coredns/build.sh, with a kubeadm-like Corefile: the kubernetes plugin for
// cluster.local, in-addr.arpa and ip6.arpa, `pods insecure`, `ttl 30`, no
// fallthrough and no forward) and `svcnet dns` (--ttl 30) against it, waits until
// both answer the fixture's last record, and sends both the same generated
// queries (Generate: every name kind times every query type, in random case)
// over UDP with EDNS0 (4096 bytes). Each pair of responses is reduced to what is
// comparable (Canon: rcode, header flags, EDNS presence, and each section as a
// multiset of records with lower-cased names and the SOA serial zeroed) and
// compared field by field.
//
// Every remaining difference must be listed in differences.md (ParseKnown) with
// the section of the Kubernetes DNS specification, or the RFC, that justifies
// svcnet's answer: the test fails on a difference no entry covers, and on an
// entry no query matched any more, so the file stays true.
//
// Contract: processes listen on 127.0.0.1 only and are stopped (SIGTERM, then
// SIGKILL) when the test ends, pass or fail; every wait and every query is
// bounded in time.
package difftest

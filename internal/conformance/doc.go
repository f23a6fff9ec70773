// Package conformance judges svcnet by Kubernetes' own sig-network e2e specs:
// it reads the JSON reports ginkgo writes for two runs on the same cluster,
// one with svcnet (proxy, dns, cni, lb) and one with upstream kube-proxy and
// CoreDNS, and compares them spec by spec against a checked-in list of known
// differences (differences.md beside the node tier's test), in the manner of
// internal/dns/difftest.
//
// Contract:
//   - A spec passes on a side when ginkgo reports it "passed"; "skipped" and
//     "pending" are skipped; every other state (failed, aborted, panicked,
//     interrupted, timedout) is failed. A spec missing from a side's report is
//     "not run" there.
//   - Every spec that does not pass on both sides must be named by an entry of
//     the list with exactly its two outcomes; an entry that names no such spec
//     any more is stale. Both are problems, as is a spec svcnet does not pass
//     while kube-proxy + CoreDNS pass it (a defect to fix, never to list) and a
//     svcnet pass count below theirs.
//   - Output is deterministic: specs sorted by name, one line per spec with
//     both outcomes, then one line per side in the form
//     "svcnet: P passed, F failed, S skipped".
//
// The package is pure: running ginkgo and deploying either side is the node
// tier's (test/node).
package conformance

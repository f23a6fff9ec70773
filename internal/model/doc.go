// Package model holds svcnet's slim, immutable view of cluster state: Services,
// EndpointSlices, Nodes and Pods, reduced to what the data plane, load balancer, DNS
// and tracer consume, plus the Store that turns source updates into snapshots and
// per-Service change sets.
//
// Contract: every value reachable from a Snapshot (the structs, their slices and maps)
// is immutable once published. Consumers read it and never modify it; a source that
// needs a different value builds a new one. Conversion from k8s.io/api types lives in
// this package and nowhere else (convert_*.go).
package model

// Package dns is svcnet's cluster DNS server: it serves the answers of package
// zone (the Kubernetes DNS specification over the model) on UDP and TCP,
// forwards names outside the cluster's zones to upstream resolvers (or refuses
// them when there are none: never an open resolver), and handles what the
// protocol asks of a server: EDNS0 buffer sizes, truncation and TCP fallback,
// FORMERR for malformed queries, NOTIMP for opcodes other than QUERY. It
// exports Prometheus metrics (requests by type and rcode, request latency,
// and programming latency from a model change to the answers that serve it).
//
// Start-up: until the source has synced, in-zone questions get SERVFAIL (a
// half-listed cluster would give wrong NXDOMAINs, which resolvers cache);
// names outside the zones are forwarded or refused from the start, as they
// do not depend on the model.
package dns

// Package servicetable builds the per-node service table: for every Service
// port and IP family, everything a data plane needs to deliver its traffic on
// one node (frontends, filters, policies, affinity, endpoint sets), computed
// purely from a model snapshot and the node's settings.
//
// The table is the one input of every data plane (internal/dataplane and its
// backends) and of the tracer, so every Kubernetes semantic (which endpoints
// count, what Local means, which frontends exist) is decided here, once, and
// never again in a backend.
package servicetable

// Package dataplane defines what a Service data plane is to svcnet proxy:
// the contract every backend (nftables, userspace) implements, and the Stats a
// sync reports for metrics and logs.
//
// The proxier owns the loop (which changes to absorb, when to sync, when a
// sync must be full); a data plane owns the kernel. The one input of a data
// plane is the per-node service table (internal/servicetable), where every
// Kubernetes semantic is already decided: a backend renders it, and never
// looks at Services or EndpointSlices.
//
// # The contract
//
//   - Sync(ctx, t, full=false) is a partial sync: it changes in the kernel
//     only what belongs to Service ports whose entry changed since the last
//     successful Sync. Entries are compared by pointer: the service table's
//     assembler reuses an unchanged *ServicePort, so a partial sync costs in
//     proportion to the change, not to the table.
//   - Sync(ctx, t, full=true) is a full sync: it reads back what the plane
//     finds in the kernel and applies the whole difference to t. The first
//     Sync of a new instance is full whatever full says, and so is the next
//     one after a failure: this is how a restarted proxy adopts what a
//     previous run left (without flushing: established connections keep
//     their state), and how drift is repaired (Stats.Drift reports it).
//   - A failed Sync leaves the kernel as it was (each family's change is one
//     atomic transaction, or the plane's equivalent).
//   - Probe runs once, before the first Sync: it checks that the kernel has
//     every feature the plane uses, so that a kernel without one fails at
//     start with an error that names the feature and wraps ErrNotSupported,
//     not deep in the first sync.
//   - Changed is the cheap drift check the proxier runs every
//     DriftCheckPeriod: whether something other than this plane may have
//     changed the kernel state since its last Sync. The proxier answers true
//     with a full Sync, rate-limited.
//   - Cleanup removes everything any instance of this plane may have
//     programmed (`svcnet proxy --cleanup`), and needs no table.
//   - A plane whose decisions the tracer explains also implements Explainer.
//
// Sync, Changed and Cleanup are called from one goroutine at a time.
//
// # Adding a data plane
//
// docs/design.md ("How to add a data plane") gives the steps: a package
// under internal/dataplane implementing DataPlane, an entry in
// internal/dataplane/planes (the --data-plane value and its constructor),
// its kernel boundary behind a narrow interface with a state-tracking fake,
// and the proxy's test suites run on it.
package dataplane

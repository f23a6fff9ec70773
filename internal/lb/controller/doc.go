// Package controller is svcnet lb's kube-mode controller (`svcnet lb
// controller`): it gives `type: LoadBalancer` Services of its class their
// external IPs on a real Kubernetes API server, as MetalLB's controller does.
//
// It watches Services, Namespaces, Nodes, EndpointSlices and IPAddressPools
// (svcnet.io/v1alpha1, through a dynamic informer), and on every change
// (coalesced) recomputes every Service's addresses with the pure planner
// (internal/lb/plan) and writes those that differ to
// status.loadBalancer.ingress. RunLeaderElected keeps it to one writer among
// replicas.
//
// Contract:
//   - No write before every informer cache has synced: the Services' current
//     statuses are the planner's input, so a restarted controller keeps every
//     assignment and allocates no address twice.
//   - Each write is UpdateStatus of one Service. A conflict re-reads the Service
//     and retries (bounded) when what the plan was computed from is unchanged,
//     and otherwise leaves it to the recompute the change triggers. Other
//     failures are retried with capped exponential backoff, a bounded number of
//     times (again after the Service changes or at the next periodic resync);
//     one Service's failure never holds up the others.
//   - Until the informer shows a write, the written status stands in for the
//     cached one in the planner's input, so an address just written is never
//     handed to a second Service by a recompute that races the watch.
//   - Events (core/v1, source component svcnet-lb-controller) on the Service:
//     Normal IPAllocated when addresses are written, Warning AllocationFailed
//     once per distinct reason while it stays pending, Normal IPReleased when its
//     addresses are cleared. Each is also logged. Bad pools are logged (as
//     errors, naming the pool) each time the set of pool errors changes.
//   - New starts nothing; Run stops every goroutine it started before returning.
package controller

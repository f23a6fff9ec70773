// Package controller is svcnet lb's kube-mode controller (`svcnet lb
// controller`): it gives `type: LoadBalancer` Services of its class their
// external IPs on a real Kubernetes API server, as MetalLB's controller does.
//
// It watches Services, Namespaces, Nodes, EndpointSlices, IPAddressPools
// (svcnet.io/v1alpha1, through a dynamic informer) and, where the apiserver
// serves them (1.33+), ServiceCIDRs, and on every change (coalesced) recomputes
// every Service's addresses with the pure planner (internal/lb/plan) and writes
// those that differ to status.loadBalancer.ingress. RunLeaderElected keeps it
// to one writer among replicas.
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
//     addresses are cleared. Each is also logged.
//   - Pools are admitted as an admission webhook would have checked them when
//     they were applied (pool.Admit; there is no webhook): established pools
//     (condition Accepted True at their generation) first, then by
//     creationTimestamp, then name. A pool overlapping one admitted before it,
//     or a new one holding a Node's InternalIP or ExternalIP, a Node's pod CIDR
//     or a service CIDR (Config.ServiceCIDRs and every ServiceCIDR object), is
//     refused: it allocates nothing and the older pool keeps every allocation.
//     An edited pool is a new one: an edit that conflicts takes the pool out
//     (its Services go pending) until it is undone. An established pool that
//     comes to hold such addresses (a Node added into it) stays admitted,
//     keeps every allocation, and no longer hands those addresses out.
//   - Each pool's fate is in its status (condition Accepted: True, reason
//     Accepted or ReservedAddresses; False, reason Overlap, ReservedAddresses
//     or Invalid, the message naming both pools and the overlap, or the node
//     or CIDR), written before Service statuses so that a restart finds the
//     pools it admitted established; a change is reported once with an Event
//     on the pool (Normal PoolAccepted, Warning PoolRefused, Warning
//     ReservedAddresses) and a log line, and refused pools are counted in
//     svcnet_lb_pool_refused{pool,reason}. Pools that do not convert are
//     logged each time the set of them changes.
//   - New starts nothing; Run stops every goroutine it started before returning.
package controller

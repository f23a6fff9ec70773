// Package podroutes gives a node host-gw routing between nodes, as flannel's
// host-gw backend or Calico without BGP do: a route to every other node's pod
// CIDR via that node's InternalIP of the same family, kept in step with the
// Nodes of the model.
//
// Ownership: every route this package makes carries the route protocol
// Protocol (154; `ip route` shows it as "proto 154") in the main table.
// List, Delete and Cleanup look only at routes with that protocol, so a
// restart adopts the routes a previous run left (a route that is still wanted
// stays as it is, a stale one is deleted) and never touches anybody else's.
// A route to a pod CIDR that somebody else already has is reported and left
// alone, never replaced.
//
// Layout: Desired and Usable are pure (nodes and local networks in, routes and
// reasons out); Kernel is the narrow boundary (Netlink for the real one, Fake
// for tests); Reconciler applies the difference whenever the model changes.
package podroutes

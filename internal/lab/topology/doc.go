// Package topology builds and tears down a lab's network: what the kernel
// holds for it and the names it is found by. It knows nothing of a control
// plane.
//
//   - The IP plan (plan.go): the node network 172.26.236.0/24 with the
//     client, the control plane and the nodes on it, a pod CIDR per node, the
//     Service range and the cluster DNS address; their IPv6 twins, and the
//     lab's families, primary first (stack.go, `lab up --ip-family`).
//   - Names (plan.go, objnames.go): the network namespaces and files of one
//     lab, NAME.fabric, NAME.client, NAME.cp, NAME.nodeN and NAME.pod.NS.POD,
//     made injectively within NAME_MAX from object names (NameKey).
//   - The fabric (network.go): a bridge in its own namespace carrying the
//     node network, and a veth port on it per attached namespace (Attach);
//     routes to the pod CIDRs (cproutes.go); a node's link cut and restored
//     (links.go).
//   - Pods' sandboxes (podnet.go, cni.go, etc.go): a network namespace wired
//     by svcnet's CNI plugin through libcni, as a container runtime wires
//     it, and the /etc files `ip netns exec` binds over /etc (resolv.conf of
//     the cluster DNS, hostname, hosts).
//   - Processes in the lab's namespaces (procs.go): started as daemons,
//     found by namespace, stopped; Remove (down.go) empties and deletes
//     every namespace of a lab and its files, also after a crash.
//
// Contract: nothing is created in the host's network namespace; every
// namespace made is named by Names, so one lab's objects are never taken for
// another's.
package topology

// Package cluster is a lab's cluster above its network (package topology):
// the control plane and the processes the lab runs as a kubelet would.
//
//   - Two control planes behind one interface, ControlPlane: File, svcnet's
//     embedded control plane over the manifests the lab keeps, published as
//     one file every node's proxy watches; and Kube, a real etcd,
//     kube-apiserver and kube-controller-manager in the lab's NAME.cp
//     namespace (kube.go, kube_pool.go).
//   - What a lab remembers about itself (Info, lab.json) and its lock
//     (state.go).
//   - The node agents (nodeagents.go, agentpods.go, proxy.go, proxyswap.go):
//     each node's svcnet proxy and, in place of its Service data plane,
//     upstream kube-proxy; the LoadBalancer controller on the kube control
//     plane; all as Pods of kube-system.
//   - Supervision (supervisor*.go, supervised.go): every process the lab
//     runs is the child of `svcnet lab supervise` (Supervise), which restarts
//     it with the kubelet's CrashLoopBackOff, probes its readiness and posts
//     its Pod's status and, for a node's Service proxy, its Node's Ready
//     condition.
//
// Every command line the lab starts is built in one place, argv.go, from the
// lab's typed settings (Info).
package cluster

// Package lab builds a whole multi-node cluster network on one machine from Linux
// network namespaces, and runs svcnet on it for real: a fabric (a bridge in its own
// namespace) carrying the node network of the IP plan, one namespace per node with a
// real `svcnet proxy`, an external client, and pods wired by svcnet's CNI plugin
// exactly as a container runtime wires them, each running `svcnet echo`. Cluster
// DNS is a pod too: kube-system/svcnet-dns on node1 runs `svcnet dns` behind the
// Service kube-system/kube-dns at 10.96.0.10, which every pod's resolv.conf names
// (see dns.go).
//
// The package is the lab's facade, what the CLI (svcnet lab) and the tests
// use: Up, Open, Down, Apply, and what lab commands do from a place of the
// lab (curl, exec, trace). It stands on two packages:
//
//   - topology: the network (the IP plan, the names below, the fabric and
//     its veths, pods' sandboxes wired by the CNI plugin, removal);
//   - cluster: the two control planes, what a lab remembers (lab.json), the
//     node agents and the supervisor of every lab process, and the command
//     line of each process the lab starts, built from typed settings.
//
// The lab plays the scheduler and the kubelet for pods (pods.go); package
// demo narrates `svcnet demo` on top of it. Up takes Options, never flags or
// the environment: the CLI and labtest fill them.
//
// Supervision (cluster.Supervise): every process the lab runs is the child of a
// supervisor of its own, `svcnet lab supervise`, in the same namespace, which
// plays the kubelet for it: it restarts the process when it exits (at once,
// then with the kubelet's CrashLoopBackOff, capped at 10 s), probes its
// readiness, and posts its Pod's status (RESTARTS in `lab get pods`). The
// processes that are no pod's server run as Pods of kube-system
// (svcnet-proxy-nodeN, kube-proxy-nodeN, svcnet-lb-controller),
// and a node is Ready while its Service proxy's /healthz passes.
//
// Node proxy (Options.Proxy, `lab up --proxy`): svcnet proxy by default. On the
// kube control plane the nodes can run upstream kube-proxy instead, in nftables
// or iptables mode (from Options.K8sBin), with `svcnet proxy --data-plane none`
// beside it for what kube-proxy does not do: the routes to other nodes' pod
// CIDRs and the layer-2 speaker; it programs no nftables table. Lab.SetProxy
// swaps the proxy of a running lab, removing the old one's rules first
// (package cluster). Options.DataPlane, when set, is every node's svcnet
// proxy's --data-plane.
//
// Cgroups: every process the lab runs for node N, its agents, its pods'
// processes and their supervisors, the node's cleanups and `lab exec` on the
// node or in one of its pods, starts in the node's cgroup v2 directory
// CGROUP2/svcnet-lab-NAME/nodeN (clone3 CLONE_INTO_CGROUP; children inherit
// it), so the eBPF plane, attached there (Options.DataPlane "ebpf": each
// node's proxy gets --cgroup), translates the connects of the node's own
// processes as it would on a real node. The control plane and the client
// stay in the caller's cgroup. A dial of a lab command (curl, HTTPGet,
// Dialer) from a node or a pod uses a socket made by a short-lived child in
// the node's namespace and cgroup (`svcnet lab sockets`, sockets.go), since a
// socket keeps its creator's cgroup and the command itself, possibly a test
// calling this package in-process, must not move into the node's cgroup: a
// process moves as a whole and would then pin the cgroup. Down removes the
// cgroups after the processes in them have exited.
//
// Layout (NAME is the lab's name, default "svcnet"; a name never contains '.', so one
// lab's objects are never taken for another's):
//
//	namespaces  NAME.fabric  bridge br0 (172.26.236.1, every namespace's default gateway); one veth port per node, client and control plane
//	            NAME.client  eth0 172.26.236.10/24 (the external client)
//	            NAME.nodeN   eth0 172.26.236.(176+N)/24; bridge cni0 with 192.168.N.1/24 (CNI)
//	            NAME.cp      eth0 172.26.236.176/24, routes to every node's pod CIDR (kube control plane only)
//	            NAME.pod.NS.POD  one per pod; eth0 from the CNI plugin
//	            (with --ip-family ipv6 the IPv6 twins instead: fd00:26:236::/64, node N
//	            fd00:26:236::(b0+N), pods fd00:192:168:N::/64; with dual both, IPv4 first)
//	files       /run/svcnet/lab/NAME/         the lab's state (lab.json, objects/, logs/, ...)
//	            /run/svcnet/lab/NAME/heartbeat.key  a random key made by Up (mode 0600): every
//	                                          node's speaker signs its heartbeats with it
//	            /etc/netns/NAME.pod.NS.POD/    the pod's resolv.conf, hostname and hosts, which
//	                                          `ip netns exec` binds over /etc
//	            /etc/netns/NAME.nodeN/         the node's resolv.conf (the cluster DNS)
//	cgroups     CGROUP2/svcnet-lab-NAME/nodeN  one per node, CGROUP2 the cgroup v2 mount (cgroup.Root)
//
// Names from objects: a name or namespace a user gave is checked by the
// apiserver's rules for its kind (controlplane.ValidateName, Validate) before
// it becomes part of any file or namespace name, and those names are made
// injectively within NAME_MAX (see topology.NameKey): NS.POD above, and
// objects/KIND.NS.NAME.yaml, are shortened to a readable prefix, '~' and a
// hash where a 253-byte Pod name would not fit.
//
// Contract: nothing is created in the host's network namespace (no interface,
// address, route, rule or nftables table); every lab process, supervisors
// included, runs inside a lab namespace. Down removes everything the lab made,
// found from the names above and the processes living in those namespaces, so
// it also works after the lab's CLI or processes (supervisors included) were
// killed (kill -9) half way; a supervisor stops its child when it is stopped,
// and Down looks at a namespace again until no process is left in it. Up over a leftover lab of the same name
// removes it first. Lab commands on one lab are serialised by a file lock.
//
// No lab command sends a packet outside the lab: every connection a lab
// command makes starts inside a lab namespace (netns.Dialer), and every name
// it dials is resolved by the place it dials from, with that place's
// resolv.conf and from inside it, or refused (resolver.go).
package lab

// Package nodecluster runs a real Kubernetes cluster on one machine, inside
// network namespaces only: a control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler: internal/kubecluster) and N nodes,
// each with its own containerd (2.x, with runc) and kubelet. It is the node
// test tier's cluster (test/node) and the cluster Kubernetes' own e2e specs run
// against.
//
// Layout (NAME is Options.Name; the network is the lab's IP plan, see
// internal/lab):
//
//	namespaces  NAME.fabric  the lab's fabric (bridge br0, 172.26.236.1) as the
//	                         nodes' router: forwarding on, a route to each
//	                         node's pod CIDR via the node, no ICMP redirects
//	            NAME.cp      172.26.236.176: etcd, kube-apiserver (:6443),
//	                         kube-controller-manager, kube-scheduler
//	            NAME.nodeN   172.26.236.(176+N): the node's holder, containerd,
//	                         its shims and the kubelet; the Pods' bridge cni0
//	                         and veths
//	cgroups     svcnet.NAME  (every hierarchy; see cgroup.go) all processes,
//	                         containers included; each node's kubelet has
//	                         cgroupRoot /svcnet.NAME/nodeN
//	files       DIR/nodecluster.json     what the cluster is (marks DIR as one)
//	            DIR/control-plane/       kubecluster's dir: kubeconfig, certs,
//	                                     etcd data, component logs
//	            DIR/nodes/nodeN/         containerd.toml, kubelet.yaml, logs
//	                                     (holder, containerd, kubelet), fs/: the
//	                                     node's /var/lib, /var/log, /opt,
//	                                     /etc overlay, CNI conf (see mounts.go)
//
// Each node's containerd and kubelet share one mount namespace and one UTS
// namespace (hostname = the Node's name) made by the node's holder, and see the
// runtime's fixed paths (/run, /var/lib, /var/log, /opt/cni/bin,
// /etc/cni/net.d) as the node's own files under DIR (mounts.go). Nodes are
// created with the lab plan's pod CIDR (node N: 192.168.N.0/24) and a
// topology.kubernetes.io/zone label (Options.Zone) before their kubelets
// register them. Images are imported into each node's containerd
// (`ctr -n k8s.io images import`); nothing is pulled.
//
// What this machine kind needs, and how it is given (see also docs/real-node.md):
// cgroup v1 controllers beside cgroup2 (failCgroupV1: false, the cgroupfs
// driver, which containerd reports to the kubelet); no CAP_SYS_RESOURCE
// (containerd's restrict_oom_score_adj); no swap accounting (failSwapOn:
// false); global kernel settings the kubelet would write (each node is shown
// the values it wants, read-only: protectKernelDefaults: true). The apiserver
// reaches kubelets by InternalIP only, never by a name the host's resolver
// would look up; a node's resolv.conf names the lab's gateway, where no name
// server answers, so no query leaves the lab. Each cluster uses about 23
// inotify instances (5 per kubelet, 2 per containerd) of the host's
// fs.inotify.max_user_instances (128 for all of root's processes): a kubelet
// that finds none left fails to start.
//
// Contract: nothing is created in the host's network namespace, and nothing
// is mounted in the host's mount namespace. Down removes every namespace,
// cgroup, process and file the cluster made, from its name and directory
// alone, also after Up's caller was killed (kill -9) half way: processes die
// with the caller (SIGKILL as parent-death signal) unless Options.Detach,
// and what outlives it (containerd's shims and the containers, which
// containerd starts in sessions of their own) is found in the cluster's
// cgroup. Every wait is bounded (Options.ReadyTimeout); errors carry the tails
// of the logs.
package nodecluster

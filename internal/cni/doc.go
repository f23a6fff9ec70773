// Package cni is svcnet's CNI plugin (CNI specification 1.1.0; it speaks
// 0.3.0 to 1.1.0): the reference bridge, host-local and portmap plugins in
// one, with one design difference. A runtime runs it as the binary named by
// `type` in CNI_PATH (the svcnet binary, or a symlink to it named svcnet),
// with CNI_* in the environment and the configuration on stdin, in the
// node's network namespace; CNI_NETNS names the pod's.
//
// # Configuration
//
//	{"cniVersion":"1.1.0","name":"svcnet","plugins":[{"type":"svcnet",
//	  "bridge":"cni0","mtu":1500,
//	  "subnets":["192.168.1.0/24","fd00:192:168:1::/64"],
//	  "dataDir":"/run/svcnet/lab/X/node1/ipam",
//	  "capabilities":{"portMappings":true}}]}
//
//	bridge   the node's bridge; default "cni0"
//	mtu      MTU of the bridge (when created) and of both veth ends; default:
//	         the MTU of the node's default-route interface, else 1500
//	subnets  the node's pod CIDRs, at least one, at most one per family, each
//	         a network address with room for a pod; required
//	dataDir  the IPAM store (see package ipam for its layout and lock);
//	         default /var/lib/cni/networks/<name>; it belongs to this network
//	dns      passed through to the result
//	runtimeConfig.portMappings
//	         the portMappings capability: [{hostPort, containerPort,
//	         protocol tcp|udp|sctp (default tcp), hostIP (optional; 0.0.0.0
//	         and :: mean every address)}]
//
// Bad configuration is rejected with code 7 naming the field and value.
//
// # Validation: what the plugin takes from its caller
//
// Every command checks its input before it touches any file, lock,
// namespace or kernel object, and refuses what breaks a rule with a CNI
// error naming the variable or field and the value (Go-quoted, cut to 64
// bytes with the full length), as libcni and skel check it, with their
// functions (containernetworking/cni pkg/utils), plus the limits that keep
// the plugin's records whole:
//
//   - CNI_CONTAINERID (ADD, CHECK, DEL) and each containerID of GC's
//     cni.dev/valid-attachments: utils.ValidateContainerID
//     (^[a-zA-Z0-9][a-zA-Z0-9_.-]*$) and at most MaxContainerIDLen (128)
//     bytes: code 4, or 7 in the GC list.
//   - CNI_IFNAME and each ifname of the GC list: utils.ValidateInterfaceName
//     (1 to 15 bytes, not "." or "..", no '/', ':' or whitespace) and no
//     NUL: code 4, or 7 in the GC list.
//   - CNI_NETNS: required for ADD and CHECK; an absolute path in canonical
//     form (no ".", ".." or empty element) without NUL: code 4. For ADD and
//     CHECK it must be a network namespace (nsfs, checked with statfs
//     before anything opens it, so a FIFO or a device is never opened):
//     code 8. For DEL, a path that is gone, or a file or directory that is
//     no longer a namespace, means the pod side is gone; anything else is
//     refused (code 8).
//   - name: utils.ValidateNetworkName and at most MaxNetworkNameLen (103)
//     bytes; bridge: as CNI_IFNAME; dataDir: absolute, canonical, not "/",
//     no NUL; code 7. The lengths keep the alias "svcnet <network>
//     <containerID> <ifname>" within the kernel's 255 bytes and each
//     hostport rule's comment within its 256 bytes of user data, so DEL and
//     GC always read back the whole owner.
//   - dataDir is one network's (the store records the name of the first
//     network to use it): a command of another network is refused with
//     code 7 instead of freeing addresses that are not its own.
//   - CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME, ...) is not read.
//
// No name the plugin makes is built by joining caller-given text into a
// path: the IPAM store's files are named by addresses (package ipam) and
// its records hold owners that read back exactly; the node end of a veth is
// named by a hash and owned by its alias, hostport chains by a hash and
// owned by their rules' comment, and a name that hashes alike but belongs
// to another owner is refused, never reused or removed.
//
// # What ADD builds
//
// The bridge (created if missing, with the gateway of each subnet, its first
// address, as 192.168.1.1/24, up), IPv4/IPv6 forwarding on in the node's
// namespace, one address per subnet from IPAM, and a veth pair: the node end
// (HostVethName: "veth" + 8 hex digits from the container ID and ifname) on
// the bridge with hairpin mode, the pod end created directly in the pod's
// namespace as CNI_IFNAME; MTU on both; the pod's loopback up.
//
// Design: the pod gets its address as a host route (/32, /128) and a default
// route via the bridge's gateway marked onlink (as Calico does; IPv6 without
// DAD). All of the pod's traffic, also to another pod on the same bridge, is
// therefore routed through the node's IP stack, where conntrack and NAT see
// both directions; nothing depends on br_netfilter. The pod ignores ICMP
// redirects, so the node's "talk to your neighbour directly" never applies.
//
// hostPorts (package hostport): nftables DNAT in the node's namespace, in the
// plugin's own tables ip/ip6 svcnet-hostport, from outside (prerouting), from
// the node itself (output) and from pods, with masquerade for hairpin and for
// the node's loopback (route_localnet is turned on on the bridge for that, and
// a filter rule keeps everyone but the node off 127.0.0.0/8).
//
// The result lists the bridge, the node end and the pod end (with its
// sandbox), the pod's addresses (/32, /128, on the pod end, with their
// gateways), the default routes and the configured DNS.
//
// # Contracts
//
//   - Every command holds the IPAM store's lock (flock) from start to end, so
//     concurrent invocations for one network, in any number of processes,
//     never hand out an address twice and never race on the bridge or the
//     hostport tables.
//   - ADD is idempotent for a repeated (container ID, ifname): the same
//     addresses, the same veth reconfigured, no duplicate. A pod interface of
//     that name that the plugin did not make is an error (101), as the spec
//     demands. A failed ADD removes everything of the attachment.
//   - Nothing leaks: every address file names its owner, every veth carries
//     the alias "svcnet <network> <containerID> <ifname>", every hostport rule
//     the comment "<network> <containerID> <ifname>". DEL removes an
//     attachment's addresses, veth and rules by owner, is idempotent, and
//     succeeds when the container is unknown or its namespace is gone. GC
//     removes every address, veth and rule of the network whose attachment is
//     not in cni.dev/valid-attachments.
//   - CHECK compares the pod interface (up, MAC, MTU, alias), its addresses
//     and routes, the node end (veth, on the bridge, up), the bridge's gateway
//     addresses, the IPAM allocation and the hostport rules with prevResult
//     and the configuration, and lists every difference (code 102).
//   - STATUS succeeds when an ADD could be served; it fails with 50 ("plugin
//     not available") when the IPAM store is unusable or a subnet is full.
//   - Errors are *types.Error whose message names the container and
//     interface (or the network, or the bad variable) and the reason: 4
//     missing or invalid environment, 5 IPAM store, 7 configuration, 8
//     namespace, 11 subnet full on ADD, 100 hostPort already in use, 101
//     interface exists (in the pod, or the node end's name taken by another
//     link), 102 CHECK failed, 999 other kernel failures.
//
// Kernel side effects live in packages link (links, addresses, routes,
// sysctls), hostport.Manager (nftables) and ipam.Store (files); this package
// plans (podSpec, buildResult, verify: pure) and orchestrates.
package cni

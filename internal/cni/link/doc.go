// Package link is the kernel boundary of svcnet's CNI plugin for links,
// addresses, routes and sysctls: the node's bridge, the veth pair of each pod,
// the pod's addresses and routes, and reading all of that back for CHECK.
//
// Namespaces. A Node works in the network namespace of the thread that
// opened it: its netlink socket is made there and keeps it, and its sysctl
// writes go to /proc/sys of the calling thread, so a caller in a namespace
// other than the process's must stay on one locked thread (internal/netns Do
// does that). The pod's namespace is entered only through internal/netns (Do:
// a fresh locked thread, retired afterwards); the pod side of a veth is made
// there directly by the kernel (IFLA_NET_NS_FD), never moved by hand.
//
// Ownership. Every veth the plugin makes carries the alias given by the
// caller on both ends (the plugin uses "svcnet <network> <containerID>
// <ifname>"; the node end gets it in the very request that creates the pair):
// DetachPod removes only links with that alias and GC finds the plugin's
// veths by it.
package link

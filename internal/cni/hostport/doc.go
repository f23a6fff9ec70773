// Package hostport implements the portMappings capability of svcnet's CNI
// plugin (the hostPort of a Kubernetes container): nftables DNAT from a port
// of the node to a port of the pod, in svcnet's own tables
// `ip svcnet-hostport` and `ip6 svcnet-hostport` (never the proxy's table
// "svcnet"), built with the internal/nft model and committed through an
// nft.Conn.
//
// The table (one per family):
//
//	map hostip-hostports   daddr . l4proto . dport : verdict   mappings bound to one hostIP
//	map hostports          l4proto . dport : verdict           mappings on every local address
//	map masquerade-pods    daddr : verdict                     pods with mappings
//	chain dispatch         the two hostport maps, the second behind `fib daddr type local`
//	chain nat-prerouting   nat prerouting dstnat: jump dispatch (traffic from outside and from pods)
//	chain nat-output       nat output -100: jump dispatch (traffic from the node itself)
//	chain nat-postrouting  nat postrouting srcnat: ip daddr vmap @masquerade-pods
//	chain filter-localnet  (ip only) filter prerouting -150: drop packets to
//	                       127.0.0.0/8 from other sources (CVE-2020-8558: the
//	                       plugin turns route_localnet on for localhost hostPorts)
//	chain hostport-<H>-<id>    one attachment's DNAT rules
//	chain masquerade-<H>-<id>  one attachment's masquerade rules: hairpin (the
//	                           pod reaching its own hostPort) and, for IPv4,
//	                           the node's loopback (127.0.0.0/8)
//
// H is a hash of (network, container ID, interface name) and <id> the first
// 12 characters of the container ID, so the names are deterministic, readable
// and far within nftables' 255 bytes whatever the identity's length. Every
// rule of an attachment's chains carries the comment "<network>
// <containerID> <ifname>" (the plugin bounds the three so that it fits the
// 256 bytes of user data, and keeps whitespace out of them): ownership is
// read from it, never from the name. So the mapping from owners to chains is
// one to one even where two identities hash alike: AddTx refuses a chain
// name that another owner's comment holds (ErrConflict), and Remove and GC
// delete only chains whose comment names the owner (OwnedBy, StaleChains).
//
// Contracts: an attachment's objects (two chains and the map elements that
// lead to them) are added, replaced or removed in one transaction per family,
// and only they are touched; the shared skeleton is (re)written with the same
// fixed rules by every Add. A hostPort already mapped to another attachment is
// an error naming it, and nothing changes. Render-side functions (Desired,
// AddTx, RemoveTx, Diff) are pure; Manager talks to the kernel.
package hostport

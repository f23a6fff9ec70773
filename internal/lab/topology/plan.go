package topology

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
)

// The IP plan (docs/design.md, after the article "Demystifying Kubernetes Services Packet Path").
var (
	NodeNetwork  = netip.MustParsePrefix("172.26.236.0/24")
	ClientAddr   = netip.MustParseAddr("172.26.236.10")
	Gateway      = netip.MustParseAddr("172.26.236.1")
	ControlAddr  = netip.MustParseAddr("172.26.236.176")
	PodNetwork   = netip.MustParsePrefix("192.168.0.0/16")
	ServiceRange = netip.MustParsePrefix("10.96.0.0/12")
	ClusterDNS   = netip.MustParseAddr("10.96.0.10")

	// The IPv6 half (stack.go): every IPv4 address of the node network has
	// the IPv6 twin with the same host number (Twin6), so that node1 is
	// 172.26.236.177 and fd00:26:236::b1, the pool's first IP
	// 172.26.236.180 and fd00:26:236::b4; node i's pods are
	// fd00:192:168:i::/64 beside 192.168.i.0/24.
	NodeNetwork6  = netip.MustParsePrefix("fd00:26:236::/64")
	PodNetwork6   = netip.MustParsePrefix("fd00:192:168::/56")
	ServiceRange6 = netip.MustParsePrefix("fd00:96::/108")
	ClusterDNS6   = netip.MustParseAddr("fd00:96::a")
)

// MaxNodes bounds --nodes: nodes 1-3 are .177-.179 as in that article; the
// LoadBalancer pool holds .180-.199, so node 4 and later are .200 and up.
const MaxNodes = 3 + 54

// RunRoot holds every lab's state directory.
const RunRoot = "/run/svcnet/lab"

// EtcNetns is where `ip netns exec` finds per-namespace /etc files.
const EtcNetns = "/etc/netns"

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// ValidateName checks a lab name: lower-case letters, digits and '-', at most 32.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("lab name %q: want lower-case letters, digits and '-' (at most 32, starting and ending with a letter or digit)", name)
	}
	return nil
}

// NodeName is the name of node i (1-based).
func NodeName(i int) string { return fmt.Sprintf("node%d", i) }

// NodeIndex returns i for "nodei" (i >= 1), or 0.
func NodeIndex(name string) int {
	var i int
	if _, err := fmt.Sscanf(name, "node%d", &i); err != nil || i < 1 || NodeName(i) != name {
		return 0
	}
	return i
}

// NodeAddr is node i's address on the node network: 172.26.236.(176+i) for the
// first three, 172.26.236.(196+i) from the fourth on.
func NodeAddr(i int) netip.Addr {
	a := NodeNetwork.Addr().As4()
	a[3] = byte(176 + i)
	if i > 3 {
		a[3] = byte(196 + i)
	}
	return netip.AddrFrom4(a)
}

// PodCIDR is node i's pod CIDR: 192.168.i.0/24.
func PodCIDR(i int) netip.Prefix {
	a := PodNetwork.Addr().As4()
	a[2] = byte(i)
	return netip.PrefixFrom(netip.AddrFrom4(a), 24)
}

// Names gives the kernel and file names of one lab.
type Names struct{ Lab string }

func (n Names) prefix() string    { return n.Lab + "." }
func (n Names) Fabric() string    { return n.prefix() + "fabric" }
func (n Names) Client() string    { return n.prefix() + "client" }
func (n Names) Control() string   { return n.prefix() + "cp" }
func (n Names) Node(i int) string { return n.prefix() + NodeName(i) }
func (n Names) Dir() string       { return filepath.Join(RunRoot, n.Lab) }
func (n Names) Path(p ...string) string {
	return filepath.Join(append([]string{n.Dir()}, p...)...)
}

// Pod is the network namespace of pod namespace/name: NAME.pod.NAMESPACE.POD,
// or a shortened, hashed form of it where that is too long or the names are not
// valid (see NameKey); distinct pods always get distinct namespaces.
func (n Names) Pod(namespace, name string) string {
	return n.prefix() + "pod." + PodKey(namespace, name)
}

// PodKey is the pod's part of the names the lab makes for it (its network
// namespace, its /etc/netns directory, its log file).
func PodKey(namespace, name string) string { return NameKey(maxPodKey, namespace, name) }

// Owns reports whether a network namespace name belongs to this lab.
func (n Names) Owns(netnsName string) bool { return strings.HasPrefix(netnsName, n.prefix()) }

// Gateway4 is node i's pod gateway, the address of its cni0 bridge: 192.168.i.1.
func Gateway4(i int) netip.Addr { return PodCIDR(i).Addr().Next() }

// HeartbeatKey is the lab's speaker key file: every node's svcnet proxy
// signs and verifies its heartbeats with it (--announce-key-file).
func (n Names) HeartbeatKey() string { return n.Path("heartbeat.key") }

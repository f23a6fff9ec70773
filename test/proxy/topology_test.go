package proxy_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/testbin"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// Addresses of the test topology (docs/design.md, IP plan).
var (
	nodeIP     = netip.MustParseAddr("172.26.236.177")
	nodeIP6    = netip.MustParseAddr("fd00:26:236::177")
	clientIP   = netip.MustParseAddr("172.26.236.10")
	clientIP6  = netip.MustParseAddr("fd00:26:236::10")
	outsideIP  = netip.MustParseAddr("172.26.236.20") // a second client address, for source ranges
	podGateway = netip.MustParseAddr("192.168.1.1")   // the node's address towards its pods
	podGW6     = netip.MustParseAddr("fd00:192:168:1::1")
)

const (
	nodeName    = "node1"
	otherNode   = "node2" // endpoints "elsewhere": still reachable from node1, see the package doc
	clusterCIDR = "192.168.0.0/16,fd00:192:168::/56"
	serviceCIDR = "10.96.0.0/12,fd00:96::/108"
	// echoPort is where every pod's echo servers listen (TCP and UDP).
	echoPort = 8080
)

// cluster is one test's topology: the node (running the proxy), the external
// client, the pods, and the manifests directory the proxy reads.
type cluster struct {
	t      *testing.T
	node   *netns.NS
	client *netns.NS
	dir    string // manifests (--state)
	// cgroup is the eBPF plane's --cgroup, the path of a child cgroup of
	// this test ("" on other planes): nothing attaches to the root.
	// bpfPins is its --bpf-pin-dir, on a BPF filesystem of this test.
	cgroup, cgroupDir, bpfPins string

	mu      sync.Mutex
	pods    []*pod
	proxies []*proxyProc
	dumping bool      // dumpState is registered for cleanup
	view    planeView // the data plane's state (plane)
}

// pod is a pod network namespace with its echo servers.
type pod struct {
	name string
	ns   *netns.NS
	ip   netip.Addr
	ip6  netip.Addr
	echo *echoServer
}

// newCluster builds the node and client namespaces and their link. It
// starts no proxy (startProxy) and no pod (addPod).
func newCluster(t *testing.T) *cluster {
	t.Helper()
	needBinary(t)
	c := &cluster{t: t, dir: t.TempDir()}
	if testbin.DataPlane() == ebpfplane.Name {
		c.cgroupDir = cgrouptest.New(t)
		c.cgroup = cgrouptest.Path(t, c.cgroupDir)
		c.bpfPins = filepath.Join(cgrouptest.BPFFS(t), "svcnet")
	}
	c.node = netnstest.New(t, "node")
	c.client = netnstest.New(t, "client")
	sysctls(t, c.client)
	sysctls(t, c.node,
		"net.ipv4.ip_forward=1",
		"net.ipv6.conf.all.forwarding=1",
		"net.ipv4.conf.all.rp_filter=0",
		"net.ipv4.conf.default.rp_filter=0")
	ipBatch(t, c.node,
		"link add eth0 type veth peer name eth0 netns "+c.client.Name(),
		"addr add "+nodeIP.String()+"/24 dev eth0",
		"addr add "+nodeIP6.String()+"/64 dev eth0 nodad",
		"link set eth0 up",
		// A default route towards a lab router that does not exist here:
		// host-originated traffic to ClusterIPs needs a route to be
		// DNATed at all, as on a real node.
		"route add default via 172.26.236.1 dev eth0",
		"route add ::/0 via fd00:26:236::1 dev eth0",
	)
	ipBatch(t, c.client,
		"addr add "+clientIP.String()+"/24 dev eth0",
		"addr add "+outsideIP.String()+"/24 dev eth0",
		"addr add "+clientIP6.String()+"/64 dev eth0 nodad",
		"link set eth0 up",
		"route add default via "+nodeIP.String(),
		"route add ::/0 via "+nodeIP6.String(),
		// LoadBalancer and external IPs (.180-.183, .188-.191) are routed to
		// the node, as a router or an L2 announcement would.
		"route add 172.26.236.180/30 via "+nodeIP.String(),
		"route add 172.26.236.188/30 via "+nodeIP.String(),
	)
	return c
}

// addPod creates a pod namespace with address 192.168.1.<host> (and
// fd00:192:168:1::<host>), routed through the node, and starts its echo
// servers, which answer "<name> <client address>".
func (c *cluster) addPod(name string, host int) *pod {
	t := c.t
	t.Helper()
	p := c.newPod(name, host)
	veth := fmt.Sprintf("vp%d", host)
	ipBatch(t, c.node,
		"link add "+veth+" type veth peer name eth0 netns "+p.ns.Name(),
		"addr add "+podGateway.String()+"/32 dev "+veth,
		"addr add "+podGW6.String()+"/128 dev "+veth+" nodad",
		"link set "+veth+" up",
		"route add "+p.ip.String()+"/32 dev "+veth,
		"route add "+p.ip6.String()+"/128 dev "+veth,
	)
	return c.startPod(p)
}

// newPod makes the namespace of pod name with addresses 192.168.1.<host> and
// fd00:192:168:1::<host>; its eth0 comes from the caller.
func (c *cluster) newPod(name string, host int) *pod {
	t := c.t
	t.Helper()
	if host < 2 || host > 254 {
		t.Fatalf("pod %s: host number %d out of 2..254", name, host)
	}
	p := &pod{
		name: name,
		ns:   netnstest.New(t, "pod"),
		ip:   netip.MustParseAddr(fmt.Sprintf("192.168.1.%d", host)),
		ip6:  netip.MustParseAddr(fmt.Sprintf("fd00:192:168:1::%x", host)),
	}
	sysctls(t, p.ns)
	return p
}

// startPod addresses and routes the pod's eth0 (via the pod gateway), starts
// its echo servers and adds it to the cluster.
func (c *cluster) startPod(p *pod) *pod {
	t := c.t
	t.Helper()
	ipBatch(t, p.ns,
		"addr add "+p.ip.String()+"/32 dev eth0",
		"addr add "+p.ip6.String()+"/128 dev eth0 nodad",
		"link set eth0 up",
		"route add "+podGateway.String()+"/32 dev eth0",
		"route add default via "+podGateway.String()+" dev eth0",
		"route add "+podGW6.String()+"/128 dev eth0",
		"route add ::/0 via "+podGW6.String()+" dev eth0",
	)
	p.echo = startEcho(t, p)
	c.mu.Lock()
	c.pods = append(c.pods, p)
	c.mu.Unlock()
	return p
}

// sysctls sets DAD off (addresses usable at once) plus extra settings in ns.
func sysctls(t testing.TB, ns *netns.NS, extra ...string) {
	t.Helper()
	args := append([]string{"sysctl", "-q", "-w",
		"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"}, extra...)
	if out, err := ns.Command(args...).CombinedOutput(); err != nil {
		t.Fatalf("sysctl in %s: %v: %s", ns.Name(), err, out)
	}
}

// ipBatch runs iproute2 commands in ns in one process (ip -batch).
func ipBatch(t testing.TB, ns *netns.NS, cmds ...string) {
	t.Helper()
	cmd := ns.Command("ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip -batch in %s: %v: %s\ncommands:\n%s", ns.Name(), err, out, strings.Join(cmds, "\n"))
	}
}

// nodeRun runs argv in the node namespace and returns its combined output.
func (c *cluster) nodeRun(argv ...string) (string, error) {
	out, err := c.node.Command(argv...).CombinedOutput()
	return string(out), err
}

// mustNode is nodeRun that fails the test on error.
func (c *cluster) mustNode(argv ...string) string {
	c.t.Helper()
	out, err := c.nodeRun(argv...)
	if err != nil {
		c.t.Fatalf("%s in node: %v: %s", strings.Join(argv, " "), err, out)
	}
	return out
}

// dumpState logs what a failing test needs to see: the data plane's state
// in the node, its conntrack table and routes, the manifests, and every
// proxy's log.
func (c *cluster) dumpState() {
	t := c.t
	ct, _ := c.nodeRun("conntrack", "-L")
	rt, _ := c.nodeRun("ip", "-br", "addr")
	var state string
	if v, err := c.viewOf(testbin.DataPlane()); err == nil {
		state = v.dump()
	} else {
		rs, _ := c.nodeRun("nft", "list", "ruleset")
		state = "node nft ruleset:\n" + tail(rs, 300)
	}
	t.Logf("%s\nnode conntrack:\n%s\nnode addresses:\n%s", state, tail(ct, 60), rt)
	if b, err := os.ReadFile(filepath.Join(c.dir, manifestFile)); err == nil {
		t.Logf("manifests:\n%s", b)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.proxies {
		t.Logf("proxy #%d (%s) log:\n%s", i+1, p.describe(), tail(p.log.String(), 200))
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d lines before ...]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

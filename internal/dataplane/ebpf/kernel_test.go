package ebpf

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// kernelPlane is the plane on a throwaway namespace and child cgroup: the
// nftables rules in the namespace, the socket load balancer attached to the
// cgroup. Backends be1 and be2 serve on addresses of lo, which also routes
// the Service range (so that connect finds a route before the rules' DNAT).
type kernelPlane struct {
	ns        *netns.NS
	cgroupDir string
	cgfd      int
	p         *Plane
	ct        *conntrack.Netlink
}

const (
	vip      = "10.96.0.10:80"
	emptyVIP = "10.96.0.11:80"
	be1      = "192.168.1.2:8080"
	be2      = "192.168.1.3:8080"
)

func newKernelPlane(t *testing.T) *kernelPlane {
	t.Helper()
	k := &kernelPlane{ns: netnstest.New(t, "ebpfplane")}
	cg := cgrouptest.New(t)
	k.cgroupDir, k.cgfd = cg, cgrouptest.Open(t, cg)
	for _, argv := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", "192.168.1.2/32", "dev", "lo"},
		{"ip", "addr", "add", "192.168.1.3/32", "dev", "lo"},
		{"ip", "route", "add", "10.96.0.0/12", "dev", "lo"},
	} {
		if out, err := k.ns.Command(argv...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	cgrouptest.ServeTCP(t, k.ns, be1, "be1")
	cgrouptest.ServeTCP(t, k.ns, be2, "be2")
	conn, err := netlink.New(k.ns)
	if err != nil {
		t.Fatal(err)
	}
	rules := nftables.New(conn, ipfamily.IPv4)
	k.p = New(rules, func() (SocketLB, error) { return socklb.Open(cg) }, nil, ipfamily.IPv4)
	if k.ct, err = conntrack.NewNetlinkIn(k.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.ct.Close()
		if err := k.p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		conn.Close()
	})
	if err := k.p.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *kernelPlane) sync(t *testing.T, ports ...*servicetable.ServicePort) {
	t.Helper()
	if _, err := k.p.Sync(context.Background(), table(ports...), false); err != nil {
		t.Fatal(err)
	}
}

// flowsTo counts the namespace's conntrack flows whose original destination
// is addr.
func (k *kernelPlane) flowsTo(t *testing.T, addr string) int {
	t.Helper()
	flows, err := k.ct.List(ipfamily.IPv4)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range flows {
		if f.OrigDst == ap(addr) {
			n++
		}
	}
	return n
}

// TestKernelSocketsSkipNAT: connects from the cgroup reach an endpoint with
// no NAT at all (conntrack sees the endpoint as the original destination)
// and getpeername reports the ClusterIP; a connect from outside the cgroup
// goes through the nftables rules' DNAT; a port with no endpoint refuses at
// once; a change of endpoints is seen by the next connect; with the socket
// load balancer closed, connects from the cgroup fall through to the rules.
func TestKernelSocketsSkipNAT(t *testing.T) {
	k := newKernelPlane(t)
	web := clusterIPPort("default/web:80/tcp", vip, ep(be1, true), ep(be2, true))
	empty := clusterIPPort("default/empty:80/tcp", emptyVIP)
	k.sync(t, web, empty)

	const connects = 40
	seen := map[string]int{}
	for i, a := range cgrouptest.Dial(t, k.ns, k.cgfd, "tcp", vip, connects) {
		if a.Peer != vip || !a.Echo || a.Err != "" || a.Errno != "" {
			t.Fatalf("connect %d from the cgroup: %+v; want peer %s and an echo", i, a, vip)
		}
		seen[a.Server]++
	}
	if len(seen) != 2 {
		t.Fatalf("%d connects reached %v; want both endpoints", connects, seen)
	}
	if n := k.flowsTo(t, vip); n != 0 {
		t.Fatalf("%d conntrack flows to the ClusterIP after connects from the cgroup; want none (no NAT)", n)
	}
	if n := k.flowsTo(t, be1) + k.flowsTo(t, be2); n < connects {
		t.Fatalf("%d conntrack flows straight to the endpoints, want %d", n, connects)
	}

	if peer, err := cgrouptest.DialOutside(t, k.ns, vip); err != nil || peer != vip {
		t.Fatalf("connect from outside the cgroup: peer %q, %v; want the rules' DNAT to answer as %s", peer, err, vip)
	}
	if n := k.flowsTo(t, vip); n != 1 {
		t.Fatalf("%d conntrack flows to the ClusterIP after a connect from outside the cgroup, want 1 (the rules' DNAT)", n)
	}

	for i, a := range cgrouptest.Dial(t, k.ns, k.cgfd, "tcp", emptyVIP, 3) {
		if a.Errno != "ECONNREFUSED" || a.Micros > 100_000 {
			t.Fatalf("connect %d to a Service without endpoints: %+v; want ECONNREFUSED at once", i, a)
		}
	}

	// be1 goes away: the next connects all reach be2.
	k.sync(t, clusterIPPort("default/web:80/tcp", vip, ep(be2, true)), empty)
	for i, a := range cgrouptest.Dial(t, k.ns, k.cgfd, "tcp", vip, 10) {
		if a.Server != "be2" || a.Peer != vip {
			t.Fatalf("connect %d after be1 left: %+v; want be2 as %s", i, a, vip)
		}
	}

	// Without the socket load balancer the rules still serve the cgroup.
	if err := k.p.Close(); err != nil {
		t.Fatal(err)
	}
	before := k.flowsTo(t, vip)
	for i, a := range cgrouptest.Dial(t, k.ns, k.cgfd, "tcp", vip, 3) {
		if a.Server != "be2" || a.Peer != vip {
			t.Fatalf("connect %d with the load balancer closed: %+v; want be2 through the rules", i, a)
		}
	}
	if n := k.flowsTo(t, vip) - before; n != 3 {
		t.Fatalf("%d new conntrack flows to the ClusterIP with the load balancer closed, want 3", n)
	}
}

// TestKernelAffinity: a port with ClientIP affinity keeps a client's
// connects on one endpoint, in the socket load balancer (no NAT).
func TestKernelAffinity(t *testing.T) {
	k := newKernelPlane(t)
	web := clusterIPPort("default/web:80/tcp", vip, ep(be1, true), ep(be2, true))
	web.AffinityTimeout = 3 * time.Hour
	k.sync(t, web)
	as := cgrouptest.Dial(t, k.ns, k.cgfd, "tcp", vip, 10)
	for i, a := range as {
		if a.Server != as[0].Server || a.Peer != vip {
			t.Fatalf("connect %d: %+v; want the same endpoint as the first (%s) as %s", i, a, as[0].Server, vip)
		}
	}
	if n := k.flowsTo(t, vip); n != 0 {
		t.Fatalf("%d conntrack flows to the ClusterIP, want none: affinity is the socket load balancer's", n)
	}
}

// TestKernelRestartAdopts: a plane pinned in a BPF filesystem leaves its
// socket load balancer attached when closed (connects from the cgroup stay
// translated with no NAT), the next plane's first sync adopts it with no
// map change, and Cleanup detaches it.
func TestKernelRestartAdopts(t *testing.T) {
	k := newKernelPlane(t)
	if err := k.p.Close(); err != nil { // the unpinned plane of newKernelPlane
		t.Fatal(err)
	}
	root := cgrouptest.BPFFS(t)
	cg := k.cgroupDir
	newPlane := func() *Plane {
		conn, err := netlink.New(k.ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return New(nftables.New(conn, ipfamily.IPv4),
			func() (SocketLB, error) { return socklb.OpenPinned(cg, root) },
			func() error { return socklb.Unpin(root, cg) }, ipfamily.IPv4)
	}
	web := clusterIPPort("default/web:80/tcp", vip, ep(be1, true), ep(be2, true))
	p1 := newPlane()
	if _, err := p1.Sync(context.Background(), table(web), false); err != nil {
		t.Fatal(err)
	}
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	for i, a := range cgrouptest.Dial(t, k.ns, k.cgfd, "tcp", vip, 5) {
		if a.Peer != vip || a.Err != "" || a.Errno != "" {
			t.Fatalf("connect %d between two planes: %+v, want it translated", i, a)
		}
	}
	if n := k.flowsTo(t, vip); n != 0 {
		t.Fatalf("%d conntrack flows to the ClusterIP between two planes, want none (the socket load balancer stayed)", n)
	}

	p2 := newPlane()
	t.Cleanup(func() { p2.Close() })
	st, err := p2.Sync(context.Background(), table(web), false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full || st.TotalOps() != 0 {
		t.Fatalf("first sync of the next plane: %+v, want full with no operation (all adopted)", st)
	}
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p2.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, err := socklb.OpenAttached(cg); !errors.Is(err, socklb.ErrNotAttached) {
		if v != nil {
			v.Close()
		}
		t.Fatalf("after Cleanup: OpenAttached = %v, want nothing attached", err)
	}
}

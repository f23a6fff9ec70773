package socklb

import (
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// harness is a throwaway namespace with a child cgroup that the load balancer
// is attached to; clients run in both, servers in the namespace.
type harness struct {
	ns   *netns.NS
	cg   string
	cgfd int
	lb   *LB
}

// newHarness makes the namespace and cgroup and attaches an LB, all removed
// when the test ends (the LB first).
func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{ns: netnstest.New(t, "socklb")}
	h.cg = cgrouptest.New(t)
	h.cgfd = cgrouptest.Open(t, h.cg)
	lb, err := Open(h.cg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	h.lb = lb
	return h
}

// client runs the test binary as a client in the cgroup and the namespace
// (cgrouptest.Client) and returns its stdout.
func (h *harness) client(t testing.TB, args ...string) []byte {
	t.Helper()
	return cgrouptest.Client(t, h.ns, h.cgfd, args...)
}

// dial runs n connects of network to addr in a client and returns them.
func (h *harness) dial(t testing.TB, network, addr string, n int) []cgrouptest.Attempt {
	t.Helper()
	return cgrouptest.Dial(t, h.ns, h.cgfd, network, addr, n)
}

// addLoopback adds the IPv6 address cidr to lo in the namespace, without
// duplicate address detection, so it is usable at once.
func (h *harness) addLoopback(t testing.TB, cidr string) {
	t.Helper()
	if out, err := h.ns.Command("ip", "-6", "addr", "add", cidr, "dev", "lo", "nodad").CombinedOutput(); err != nil {
		t.Fatalf("add %s to lo: %v: %s", cidr, err, out)
	}
}

func (h *harness) serveTCP(t testing.TB, addr, name string) {
	t.Helper()
	cgrouptest.ServeTCP(t, h.ns, addr, name)
}

func (h *harness) serveUDP(t testing.TB, addr, name string) {
	t.Helper()
	cgrouptest.ServeUDP(t, h.ns, addr, name)
}

func (h *harness) dialOutside(t testing.TB, addr string) (string, error) {
	t.Helper()
	return cgrouptest.DialOutside(t, h.ns, addr)
}

package link

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func sh(t *testing.T, ns *netns.NS, argv ...string) string {
	t.Helper()
	out, err := ns.Command(argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// inNode runs fn with a Node opened in ns, on ns's thread.
func inNode(t *testing.T, ns *netns.NS, fn func(n *Node) error) error {
	t.Helper()
	return ns.Do(func() error {
		n, err := OpenNode()
		if err != nil {
			return err
		}
		defer n.Close()
		return fn(n)
	})
}

var gws = []netip.Prefix{netip.MustParsePrefix("192.168.1.1/24"), netip.MustParsePrefix("fd00:192:168:1::1/64")}

// EnsureBridge creates once, is idempotent, keeps a fixed MAC as ports come,
// and refuses a link of that name that is not a bridge.
func TestEnsureBridge(t *testing.T) {
	node := netnstest.New(t, "linknode")
	var first, again Info
	if err := inNode(t, node, func(n *Node) (err error) {
		if first, err = n.EnsureBridge("cni0", 1450, gws); err != nil {
			return err
		}
		again, err = n.EnsureBridge("cni0", 9000, gws)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if first.Kind != "bridge" || !first.Up || first.MTU != 1450 || first.MAC != bridgeMAC("cni0").String() {
		t.Fatalf("bridge %+v", first)
	}
	if again.Index != first.Index || again.MTU != 1450 {
		t.Fatalf("second EnsureBridge %+v, want the same bridge untouched", again)
	}
	sh(t, node, "ip", "link", "add", "p0", "type", "veth", "peer", "name", "p1")
	sh(t, node, "ip", "link", "set", "p0", "master", "cni0", "up")
	if out := sh(t, node, "ip", "link", "show", "cni0"); !strings.Contains(out, first.MAC) {
		t.Fatalf("bridge MAC changed when a port joined:\n%s", out)
	}
	addrs := sh(t, node, "ip", "addr", "show", "cni0")
	if strings.Count(addrs, "192.168.1.1/24") != 1 || strings.Count(addrs, "fd00:192:168:1::1/64") != 1 {
		t.Fatalf("gateway addresses:\n%s", addrs)
	}
	err := inNode(t, node, func(n *Node) error { _, err := n.EnsureBridge("p1", 1500, nil); return err })
	if err == nil || !strings.Contains(err.Error(), "is a veth") {
		t.Fatalf("EnsureBridge over a veth: %v", err)
	}
}

// AttachPod, InspectPod and DetachPod round trip; a foreign pod interface is
// refused and survives DetachPod.
func TestAttachInspectDetach(t *testing.T) {
	node, pod := netnstest.New(t, "linknode"), netnstest.New(t, "linkpod")
	spec := PodSpec{
		NetNS: pod.Path(), IfName: "eth0", HostVeth: "vethtest0", Bridge: "cni0", MTU: 1400, Alias: "svcnet n c1 eth0",
		Addrs:  []netip.Prefix{netip.MustParsePrefix("192.168.1.2/32"), netip.MustParsePrefix("fd00:192:168:1::2/128")},
		Routes: []Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("192.168.1.1"), OnLink: true}},
	}
	var host, podInfo Info
	if err := inNode(t, node, func(n *Node) (err error) {
		if _, err = n.EnsureBridge("cni0", 1400, gws); err != nil {
			return err
		}
		host, podInfo, err = n.AttachPod(spec)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if host.Kind != "veth" || host.Alias != spec.Alias || !host.Up || host.MTU != 1400 || host.Master == 0 {
		t.Fatalf("node end %+v", host)
	}
	st, err := InspectPod(pod.Path(), "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if st.Link.MAC != podInfo.MAC || st.Link.Alias != spec.Alias || !st.LoopbackUp || !st.Link.Up {
		t.Fatalf("pod state %+v, attach said %+v", st, podInfo)
	}
	for _, p := range spec.Addrs {
		found := false
		for _, a := range st.Addrs {
			found = found || a == p
		}
		if !found {
			t.Errorf("address %s not read back: %v", p, st.Addrs)
		}
	}
	if !slices.Contains(st.Routes, spec.Routes[0]) {
		t.Errorf("routes %v lack %v", st.Routes, spec.Routes[0])
	}
	if _, err := InspectPod(pod.Path(), "eth9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("InspectPod of a missing interface: %v", err)
	}
	if _, err := InspectPod("/run/netns/svcnet-no-such-ns", "eth0"); !errors.Is(err, ErrNetNS) {
		t.Errorf("InspectPod of a missing namespace: %v", err)
	}

	if err := inNode(t, node, func(n *Node) error { return n.DetachPod("vethtest0", pod.Path(), "eth0", spec.Alias) }); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, node, "ip", "-o", "link", "show", "type", "veth"); out != "" {
		t.Fatalf("veth left: %s", out)
	}
	// A foreign eth0: AttachPod refuses it, DetachPod leaves it.
	sh(t, pod, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "x0")
	err = inNode(t, node, func(n *Node) error {
		if _, _, err := n.AttachPod(spec); !errors.Is(err, ErrExists) {
			t.Errorf("AttachPod over a foreign eth0: %v", err)
		}
		return n.DetachPod("vethtest0", pod.Path(), "eth0", spec.Alias)
	})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, pod, "ip", "link", "show", "eth0")
}

func TestDefaultRouteMTU(t *testing.T) {
	node := netnstest.New(t, "linknode")
	var mtu int
	var ok bool
	_ = inNode(t, node, func(n *Node) error { mtu, ok = n.DefaultRouteMTU(); return nil })
	if ok {
		t.Fatalf("a fresh namespace has a default route (mtu %d)", mtu)
	}
	sh(t, node, "ip", "link", "add", "up0", "mtu", "1380", "type", "veth", "peer", "name", "up1")
	sh(t, node, "ip", "link", "set", "up0", "up")
	sh(t, node, "ip", "addr", "add", "10.9.0.1/24", "dev", "up0")
	sh(t, node, "ip", "route", "add", "default", "via", "10.9.0.2", "dev", "up0", "onlink")
	_ = inNode(t, node, func(n *Node) error { mtu, ok = n.DefaultRouteMTU(); return nil })
	if !ok || mtu != 1380 {
		t.Fatalf("DefaultRouteMTU = %d, %v; want 1380", mtu, ok)
	}
}

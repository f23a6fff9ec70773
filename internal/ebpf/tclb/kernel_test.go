package tclb

import (
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/model"
)

const (
	tries    = 32 // P(one of two backends never chosen) = 2^-31
	nodePort = 30080
	beNode   = 8080
)

type family struct {
	name                                  string
	node, client, pod, remote, lb, podNet string
	podGW                                 string // the node's address facing the pod
}

var families = []family{
	{"ipv4", nodeIP4, clientIP4, podIP4, remoteIP4, lbIP4, "10.2.0.0/24", "10.1.0.1"},
	{"ipv6", nodeIP6, clientIP6, podIP6, remoteIP6, lbIP6, "fd32::/64", "fd31::1"},
}

func ap(addr string, port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port))
}

func hostPort(addr string, port int) string { return net.JoinHostPort(addr, strconv.Itoa(port)) }

// TestClusterPolicy: new connections to a NodePort reach a local backend
// masqueraded by the node's rules (the mark) and a remote one from the
// node's address and a SNAT port, both ways through the programs, over TCP
// and UDP, IPv4 and IPv6; in both attach modes.
func TestClusterPolicy(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			h := newHarness(t)
			serve(t, h.pod, "pod", beNode)
			serve(t, h.remote, "remote", beNode)
			lb := h.open(t, mode.m)
			for _, f := range families {
				for _, proto := range []model.Protocol{model.ProtocolTCP, model.ProtocolUDP} {
					t.Run(f.name+"/"+string(proto), func(t *testing.T) {
						bes := []Backend{{ap(f.pod, beNode), true}, {ap(f.remote, beNode), false}}
						if err := lb.SetService(ap(f.node, nodePort), proto, bes, Policy{}); err != nil {
							t.Fatal(err)
						}
						network := map[model.Protocol]string{model.ProtocolTCP: "tcp", model.ProtocolUDP: "udp"}[proto]
						seen := map[string]int{}
						for i := range tries {
							a, err := ask(h.client, network, hostPort(f.node, nodePort), 0)
							if err != nil {
								t.Fatalf("request %d: %v", i, err)
							}
							seen[a.Server]++
							switch a.Server {
							case "pod":
								if a.Peer.Addr() != netip.MustParseAddr(f.podGW) {
									t.Errorf("request %d: the local backend saw %v, want the node's masquerade address %s", i, a.Peer, f.podGW)
								}
							case "remote":
								if a.Peer.Addr() != netip.MustParseAddr(f.node) || !IsSNATPort(a.Peer.Port()) {
									t.Errorf("request %d: the remote backend saw %v, want %s and a SNAT port of %s", i, a.Peer, f.node, SNATPorts)
								}
							}
						}
						if seen["pod"] == 0 || seen["remote"] == 0 {
							t.Errorf("backends reached in %d requests: %v, want both", tries, seen)
						}
					})
				}
			}
		})
	}
}

// TestLocalPolicy: under externalTrafficPolicy Local, a LoadBalancer IP's
// connections keep the client's address; from the pod network they are
// left to the rules (none here: the LB IP answers nothing); a deleted
// frontend is left to the rules too.
func TestLocalPolicy(t *testing.T) {
	h := newHarness(t)
	serve(t, h.pod, "pod", beNode)
	serve(t, h.remote, "remote", beNode)
	lb := h.open(t, TCX, netip.MustParsePrefix("10.2.0.0/24"), netip.MustParsePrefix("fd32::/64"))
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			run(t, h.client, "ip", "route", "add", f.lb, "via", f.node)
			run(t, h.remote, "ip", "route", "add", f.lb, "via", map[string]string{"ipv4": "10.2.0.1", "ipv6": "fd32::1"}[f.name])
			front := ap(f.lb, 80)
			if err := lb.SetService(front, model.ProtocolTCP, []Backend{{ap(f.pod, beNode), true}}, Policy{Local: true}); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				a, err := ask(h.client, "tcp", front.String(), 0)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if a.Server != "pod" || a.Peer.Addr() != netip.MustParseAddr(f.client) {
					t.Errorf("request %d: %+v, want the pod, seeing the client %s", i, a, f.client)
				}
			}
			// From the pod network: left to the rules, which this node
			// has none of, so the LB IP is an address nobody holds.
			if a, err := askWithin(h.remote, "tcp", front.String(), 0, 300*time.Millisecond); err == nil {
				t.Errorf("from the pod network: %+v, want no answer (left to the node's rules)", a)
			}
			if err := lb.SetService(front, model.ProtocolTCP, []Backend{{ap(f.remote, beNode), false}}, Policy{Local: true}); err == nil {
				t.Error("a remote backend under a Local policy: no error")
			}
			if err := lb.DeleteService(front, model.ProtocolTCP); err != nil {
				t.Fatal(err)
			}
			if a, err := askWithin(h.client, "tcp", front.String(), 0, 300*time.Millisecond); err == nil {
				t.Errorf("after delete: %+v, want no answer", a)
			}
		})
	}
}

// TestSourcePortReuse: a client that connects again from the same source
// port after a connection closed gets a new connection with a new choice of
// backend, not the old entry's backend.
func TestSourcePortReuse(t *testing.T) {
	h := newHarness(t)
	serve(t, h.pod, "pod", beNode)
	serve(t, h.remote, "remote", beNode)
	lb := h.open(t, TCX)
	front := ap(nodeIP4, nodePort)
	bes := []Backend{{ap(podIP4, beNode), true}, {ap(remoteIP4, beNode), false}}
	if err := lb.SetService(front, model.ProtocolTCP, bes, Policy{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i := range tries {
		a, err := ask(h.client, "tcp", front.String(), 40000)
		if err != nil {
			t.Fatalf("request %d from port 40000: %v", i, err)
		}
		seen[a.Server]++
	}
	if seen["pod"] == 0 || seen["remote"] == 0 {
		t.Errorf("backends reached in %d connections from one source port: %v, want both", tries, seen)
	}
}

// TestUDPFlowLeavesRemovedBackend: a UDP flow keeps its backend while the
// backend stays, and its next datagram goes to a new one once the backend
// is removed, as kube-proxy clears conntrack.
func TestUDPFlowLeavesRemovedBackend(t *testing.T) {
	h := newHarness(t)
	serve(t, h.pod, "pod", beNode)
	serve(t, h.remote, "remote", beNode)
	lb := h.open(t, TCX)
	front := ap(nodeIP4, nodePort)
	if err := lb.SetService(front, model.ProtocolUDP, []Backend{{ap(remoteIP4, beNode), false}}, Policy{}); err != nil {
		t.Fatal(err)
	}
	if a, err := ask(h.client, "udp", front.String(), 40200); err != nil || a.Server != "remote" {
		t.Fatalf("first datagram: %+v, %v; want the remote backend", a, err)
	}
	// Another backend added: the flow stays.
	bes := []Backend{{ap(remoteIP4, beNode), false}, {ap(podIP4, beNode), true}}
	if err := lb.SetService(front, model.ProtocolUDP, bes, Policy{}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if a, err := ask(h.client, "udp", front.String(), 40200); err != nil || a.Server != "remote" {
			t.Fatalf("datagram %d after a backend was added: %+v, %v; want the remote backend still", i, a, err)
		}
	}
	// Its backend removed: the next datagram goes to the one left.
	if err := lb.SetService(front, model.ProtocolUDP, bes[1:], Policy{}); err != nil {
		t.Fatal(err)
	}
	if a, err := ask(h.client, "udp", front.String(), 40200); err != nil || a.Server != "pod" {
		t.Fatalf("datagram after its backend was removed: %+v, %v; want the pod", a, err)
	}
}

// TestSNATPortsHeld: many short connections to one remote backend, each
// closed by the server first (so the backend holds TIME_WAIT), all succeed,
// each from a SNAT port none of the others used (a closed connection's port
// is held for the backend's TIME_WAIT).
func TestSNATPortsHeld(t *testing.T) {
	h := newHarness(t)
	serve(t, h.remote, "remote", beNode)
	lb := h.open(t, TCX)
	front := ap(nodeIP4, nodePort)
	if err := lb.SetService(front, model.ProtocolTCP, []Backend{{ap(remoteIP4, beNode), false}}, Policy{}); err != nil {
		t.Fatal(err)
	}
	used := map[uint16]bool{}
	const conns = 300
	for i := range conns {
		// Ten client ports, reused in turn: each reuse replaces the
		// connection and releases its SNAT entry, closed.
		a, err := ask(h.client, "tcp", front.String(), 41000+i%10)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if used[a.Peer.Port()] {
			t.Fatalf("connection %d: SNAT port %d again, within the backend's TIME_WAIT", i, a.Peer.Port())
		}
		used[a.Peer.Port()] = true
	}
}

// TestRemoteViaOtherInterface: a remote backend the node routes through an
// interface the programs are not on (a tunnel, another NIC) is reached
// through the node's stack, masqueraded by its rules, so its answers come
// back through conntrack and the egress program: every request answered.
func TestRemoteViaOtherInterface(t *testing.T) {
	h := newHarness(t)
	serve(t, h.remote, "remote", beNode)
	var lb *LB
	err := h.node.Do(func() error {
		var err error
		lb, err = Open(Config{SNAT: []netip.Addr{netip.MustParseAddr(nodeIP4)}, MasqueradeMark: 0x4000}, TCX, h.ifindexes[0])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	front := ap(nodeIP4, nodePort)
	if err := lb.SetService(front, model.ProtocolTCP, []Backend{{ap(remoteIP4, beNode), false}}, Policy{}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		a, err := ask(h.client, "tcp", front.String(), 0)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if a.Server != "remote" || a.Peer.Addr() != netip.MustParseAddr("10.2.0.1") {
			t.Errorf("request %d: %+v, want the remote backend, seeing the node's address towards it (masqueraded)", i, a)
		}
	}
}

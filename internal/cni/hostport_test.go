package cni_test

import (
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// Lab node-network addresses (docs/design.md, IP plan): node1 and the external client.
const (
	node4    = "172.26.236.177"
	node6    = "fd00:26:236::177"
	outside4 = "172.26.236.10"
	outside6 = "fd00:26:236::10"
)

// outside is a client namespace on the node's link.
type outside struct {
	ns           *netns.NS
	addr4, addr6 string
}

// newOutside links a new "outside" namespace to the lab's node by a veth
// (ext0 on both sides) with the node at .177 and the client at .10.
func newOutside(t *testing.T, l *lab) *outside {
	t.Helper()
	o := &outside{ns: netnstest.New(t, "cniout"), addr4: outside4, addr6: outside6}
	sh(t, l.node, "ip", "link", "add", "ext0", "type", "veth", "peer", "name", "ext0", "netns", o.ns.Name())
	sh(t, l.node, "ip", "addr", "add", node4+"/24", "dev", "ext0")
	sh(t, l.node, "ip", "addr", "add", node6+"/64", "dev", "ext0", "nodad")
	sh(t, l.node, "ip", "link", "set", "ext0", "up")
	sh(t, o.ns, "ip", "addr", "add", outside4+"/24", "dev", "ext0")
	sh(t, o.ns, "ip", "addr", "add", outside6+"/64", "dev", "ext0", "nodad")
	sh(t, o.ns, "ip", "link", "set", "ext0", "up")
	return o
}

// hostPorts with real traffic: from outside (IPv4, IPv6, TCP, UDP, bound to
// one host address), from another pod, from the pod itself (hairpin:
// masqueraded to the gateway), from the node itself (its address, and
// 127.0.0.1: masqueraded); after DEL nothing answers and the tables hold no
// trace of the container.
func TestHostPortTraffic(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	out := newOutside(t, l)
	a, b := l.newPod(), l.newPod()
	maps := portMappings(pm(8080, 80, "tcp"), pm(5353, 53, "udp"),
		map[string]any{"hostPort": 9090, "containerPort": 80, "protocol": "tcp", "hostIP": node4})
	ra := l.add(a, maps)
	rb := l.add(b, nil)
	ipB4, ipB6 := podIP(t, rb, false).String(), podIP(t, rb, true).String()
	serveWho(t, a.ns, 80)
	serveWho(t, a.ns, 53)

	for _, c := range []struct {
		name    string
		from    *netns.NS
		udp     bool
		addr    string
		wantWho string
	}{
		{"outside tcp", out.ns, false, node4 + ":8080", outside4},
		{"outside tcp ipv6", out.ns, false, "[" + node6 + "]:8080", outside6},
		{"outside udp", out.ns, true, node4 + ":5353", outside4},
		{"outside udp ipv6", out.ns, true, "[" + node6 + "]:5353", outside6},
		{"outside to the hostIP-bound port", out.ns, false, node4 + ":9090", outside4},
		{"other pod via the node address", b.ns, false, node4 + ":8080", ipB4},
		{"other pod via the gateway", b.ns, false, gw4 + ":8080", ipB4},
		{"other pod ipv6", b.ns, false, "[" + node6 + "]:8080", ipB6},
		{"other pod udp", b.ns, true, node4 + ":5353", ipB4},
		{"hairpin", a.ns, false, node4 + ":8080", gw4},
		{"hairpin ipv6", a.ns, false, "[" + node6 + "]:8080", gw6},
		{"hairpin udp", a.ns, true, node4 + ":5353", gw4},
		{"node via its address", l.node, false, node4 + ":8080", node4},
		{"node via loopback", l.node, false, "127.0.0.1:8080", gw4},
		{"node via loopback udp", l.node, true, "127.0.0.1:5353", gw4},
		{"node ipv6", l.node, false, "[" + node6 + "]:8080", node6},
	} {
		t.Run(c.name, func(t *testing.T) {
			ask := askTCP
			if c.udp {
				ask = askUDP
			}
			who, err := ask(c.from, c.addr)
			if err != nil || who != c.wantWho {
				t.Fatalf("%s: the pod saw %q, %v; want %s", c.addr, who, err, c.wantWho)
			}
		})
	}
	// The hostIP-bound mapping answers on that address only.
	if who, err := askTCP(b.ns, gw4+":9090"); err == nil {
		t.Errorf("port 9090 answered on the gateway address (seen %q); it is bound to %s", who, node4)
	}
	if err := l.check(a, maps, ra); err != nil {
		t.Fatalf("CHECK: %v", err)
	}

	l.del(a, maps)
	for _, addr := range []string{node4 + ":8080", "[" + node6 + "]:8080", node4 + ":9090"} {
		if who, err := askTCP(out.ns, addr); err == nil {
			t.Errorf("%s still answers after DEL (seen %q)", addr, who)
		}
	}
	if who, err := askUDP(out.ns, node4+":5353"); err == nil {
		t.Errorf("udp 5353 still answers after DEL (seen %q)", who)
	}
	tables := l.hostportTables()
	if strings.Contains(tables, a.id) || strings.Contains(tables, podIP(t, ra, false).String()) || strings.Contains(tables, "8080") {
		t.Errorf("tables after DEL:\n%s", tables)
	}
}

// A hostPort in use by one pod is refused to another with a clear error;
// the refused ADD leaves nothing and the first pod keeps its port.
func TestHostPortConflict(t *testing.T) {
	l := newLab(t, podCIDR4)
	out := newOutside(t, l)
	a, b := l.newPod(), l.newPod()
	maps := portMappings(pm(8080, 80, "tcp"))
	l.add(a, maps)
	serveWho(t, a.ns, 80)
	_, err := l.run("ADD", b, "eth0", l.config(maps))
	if err == nil || !strings.Contains(err.Error(), "hostPort already in use") || !strings.Contains(err.Error(), "container "+a.id) {
		t.Fatalf("conflicting ADD: %v", err)
	}
	if got := l.allocations(); len(got) != 1 {
		t.Fatalf("allocations after the refused ADD: %v", got)
	}
	if who, err := askTCP(out.ns, node4+":8080"); err != nil || who != outside4 {
		t.Fatalf("pod a's hostPort after the refused ADD: %q, %v", who, err)
	}
}

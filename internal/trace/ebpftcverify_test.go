package trace

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/tclb"
	"github.com/svcnet/svcnet/internal/model"
)

// fakeTC is a node's tc load balancer maps: one frontend's entry and the
// connections it made, by client.
type fakeTC struct {
	backends []tclb.Backend
	local    bool
	found    bool
	conns    map[netip.AddrPort]tclb.Conn
	// slots is the frontend's Maglev table, by slot (nil: none).
	slots  map[uint32]netip.AddrPort
	closed bool
}

func (f *fakeTC) Service(netip.AddrPort, model.Protocol) ([]tclb.Backend, tclb.Policy, bool, error) {
	return f.backends, tclb.Policy{Local: f.local}, f.found, nil
}

func (f *fakeTC) Conn(client, _ netip.AddrPort, _ model.Protocol) (tclb.Conn, bool, error) {
	c, ok := f.conns[client]
	return c, ok, nil
}

func (f *fakeTC) MaglevSlot(_ netip.AddrPort, _ model.Protocol, slot uint32) (netip.AddrPort, bool, error) {
	be, ok := f.slots[slot]
	return be, ok, nil
}

func (f *fakeTC) Close() error { f.closed = true; return nil }

// TestCheckTC: Verify holds the tc load balancer's decision in the trace
// against its maps on the entry node: the entry with exactly the traced
// backends and policy, none for a frontend left to the rules, and the
// probe's connection to one of them with the traced translation (SNAT to
// the node's address for a remote backend, the masquerade mark for a local
// one under the Cluster policy); no tc load balancer attached is a
// difference, not an error.
func TestCheckTC(t *testing.T) {
	fe := netip.MustParseAddrPort("172.26.236.177:30080")
	client := netip.MustParseAddrPort("172.26.236.10:40000")
	local, remote := netip.MustParseAddrPort("192.168.1.10:8080"), netip.MustParseAddrPort("192.168.2.10:8080")
	held := func(localPolicy bool) *TCLB {
		return &TCLB{Hook: "tc ingress eth0", Node: "node1", Iface: "eth0", Frontend: fe, Proto: "tcp", Held: true,
			Backends: []netip.AddrPort{local, remote}, Local: []bool{true, false}, LocalPolicy: localPolicy,
			Backend: local, BackendLocal: true, Client: client, NodeAddr: netip.MustParseAddr("172.26.236.177")}
	}
	maglev := func() *TCLB {
		x := held(false)
		x.Maglev, x.MaglevSlot = true, 4242
		return x
	}
	entry := []tclb.Backend{{AddrPort: remote}, {AddrPort: local, Local: true}}
	snat := netip.MustParseAddrPort("172.26.236.177:63001")
	left := &TCLB{Hook: "tc ingress eth0", Node: "node1", Iface: "eth0", Frontend: fe, Proto: "tcp", Left: "loadBalancerSourceRanges are checked by the nftables rules"}
	for _, tc := range []struct {
		name    string
		x       *TCLB
		maps    fakeTC
		openErr error
		diff    string // a phrase of the one difference; "" for none
		checked string // a phrase of what agreed
		err     bool
	}{
		{name: "remote backend, SNATed (the trace followed a local one first)", x: held(false),
			maps:    fakeTC{backends: entry, found: true, conns: map[netip.AddrPort]tclb.Conn{client: {Backend: remote, SNAT: snat}}},
			checked: "went to 192.168.2.10:8080, SNATed to 172.26.236.177:63001, as traced"},
		{name: "local backend, masqueraded", x: held(false),
			maps:    fakeTC{backends: entry, found: true, conns: map[netip.AddrPort]tclb.Conn{client: {Backend: local, Masquerade: true}}},
			checked: "went to 192.168.1.10:8080 with the masquerade mark, as traced"},
		{name: "local backend under the Local policy keeps the client", x: held(true),
			maps:    fakeTC{backends: entry, local: true, found: true, conns: map[netip.AddrPort]tclb.Conn{client: {Backend: local}}},
			checked: "keeping the client's address, as traced"},
		{name: "local backend masqueraded under the Local policy", x: held(true),
			maps: fakeTC{backends: entry, local: true, found: true, conns: map[netip.AddrPort]tclb.Conn{client: {Backend: local, Masquerade: true}}},
			diff: "with masquerade true, but the trace has false"},
		{name: "remote backend SNATed to another address", x: held(false),
			maps: fakeTC{backends: entry, found: true, conns: map[netip.AddrPort]tclb.Conn{client: {Backend: remote, SNAT: netip.MustParseAddrPort("172.26.236.178:63001")}}},
			diff: "SNATed to 172.26.236.178:63001, but the trace has the node's address 172.26.236.177 and a port of 1024–32767 or 61000–65535"},
		{name: "remote backend without SNAT", x: held(false),
			maps: fakeTC{backends: entry, found: true, conns: map[netip.AddrPort]tclb.Conn{client: {Backend: remote}}},
			diff: "on another node, without SNAT"},
		{name: "a backend missing from the entry", x: held(false),
			maps: fakeTC{backends: entry[:1], found: true},
			diff: "has backends [192.168.2.10:8080], but the trace has [192.168.1.10:8080, 192.168.2.10:8080]"},
		{name: "the policy differs", x: held(false), maps: fakeTC{backends: entry, local: true, found: true},
			diff: "has the Local policy true, but the trace has false"},
		{name: "no entry", x: held(false), diff: "has no services map entry for 172.26.236.177:30080/tcp"},
		{name: "no connection after the probe", x: held(false), maps: fakeTC{backends: entry, found: true},
			diff: "its conns map has no connection 172.26.236.10:40000 → 172.26.236.177:30080/tcp after the probe"},
		{name: "the connection went elsewhere", x: held(false),
			maps: fakeTC{backends: entry, found: true, conns: map[netip.AddrPort]tclb.Conn{client: {Backend: netip.MustParseAddrPort("192.168.3.10:8080")}}},
			diff: "went to 192.168.3.10:8080, none of the traced backends"},
		{name: "Maglev: the slot holds the traced backend, which the connection went to", x: maglev(),
			maps: fakeTC{backends: entry, found: true, slots: map[uint32]netip.AddrPort{4242: local},
				conns: map[netip.AddrPort]tclb.Conn{client: {Backend: local, Masquerade: true}}},
			checked: "its Maglev table holds 192.168.1.10:8080 at slot 4242, as traced; the probe's connection 172.26.236.10:40000 → 172.26.236.177:30080/tcp went to 192.168.1.10:8080, the backend of the Maglev slot 4242"},
		{name: "Maglev: the slot holds another backend", x: maglev(),
			maps: fakeTC{backends: entry, found: true, slots: map[uint32]netip.AddrPort{4242: remote}},
			diff: "the Maglev table of 172.26.236.177:30080/tcp holds 192.168.2.10:8080 at slot 4242, but the trace has 192.168.1.10:8080"},
		{name: "Maglev: no table", x: maglev(), maps: fakeTC{backends: entry, found: true},
			diff: "the Maglev table of 172.26.236.177:30080/tcp has no backend at slot 4242"},
		{name: "left, no entry", x: left, checked: "has no entry for 172.26.236.177:30080/tcp, as traced"},
		{name: "left, but an entry", x: left, maps: fakeTC{backends: entry, found: true},
			diff: "but the trace leaves it to the nftables rules (loadBalancerSourceRanges"},
		{name: "left, not attached", x: left, openErr: fmt.Errorf("node node1: eth0: tclb: interface 2: %w", tclb.ErrNotAttached),
			checked: "no tc load balancer attached to eth0, as traced"},
		{name: "not attached", x: held(false), openErr: fmt.Errorf("node node1: eth0: tclb: interface 2: %w", tclb.ErrNotAttached),
			diff: "no tc load balancer attached"},
		{name: "the maps cannot be read", x: held(false), openErr: errors.New("permission denied"), err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.maps
			var opened []string
			open := func(node, iface string) (TCMaps, error) {
				opened = append(opened, node+" "+iface)
				if tc.openErr != nil {
					return nil, tc.openErr
				}
				return &m, nil
			}
			k, err := checkTC(&Trace{TC: tc.x}, open)
			if (err != nil) != tc.err {
				t.Fatalf("error %v; want one: %v", err, tc.err)
			}
			if len(opened) != 1 || opened[0] != "node1 eth0" {
				t.Errorf("opened %q; want node1's eth0", opened)
			}
			if tc.err {
				return
			}
			if tc.openErr == nil && !m.closed {
				t.Errorf("the maps were not closed")
			}
			switch {
			case tc.diff == "" && len(k.diffs) > 0:
				t.Errorf("differences %q; want none", k.diffs)
			case tc.diff != "" && (len(k.diffs) != 1 || !strings.Contains(k.diffs[0], tc.diff)):
				t.Errorf("differences %q; want one saying %q", k.diffs, tc.diff)
			}
			if !strings.Contains(k.checked, tc.checked) {
				t.Errorf("checked %q; want it to say %q", k.checked, tc.checked)
			}
		})
	}
}

// TestTCState: Verify's reads of the tc load balancer before and after the
// probe agree while nothing changed (backends in any order), and differ,
// naming both states, when the proxy programmed the frontend, changed its
// backends or policy, or rebuilt its Maglev table in between; no tc load
// balancer attached is a state, unreadable maps an error.
func TestTCState(t *testing.T) {
	fe := netip.MustParseAddrPort("172.26.236.177:30080")
	a, b := netip.MustParseAddrPort("192.168.1.10:8080"), netip.MustParseAddrPort("192.168.2.10:8080")
	x := &TCLB{Hook: "tc ingress eth0", Node: "node1", Iface: "eth0", Frontend: fe, Proto: "tcp", Held: true, Maglev: true, MaglevSlot: 7}
	state := func(m *fakeTC, openErr error) string {
		t.Helper()
		s, err := tcState(x, func(node, iface string) (TCMaps, error) {
			if node != "node1" || iface != "eth0" {
				t.Errorf("opened %s %s; want node1 eth0", node, iface)
			}
			if openErr != nil {
				return nil, openErr
			}
			return m, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if openErr == nil && !m.closed {
			t.Errorf("the maps were not closed")
		}
		return s
	}
	both := &fakeTC{backends: []tclb.Backend{{AddrPort: a, Local: true}, {AddrPort: b}}, found: true, slots: map[uint32]netip.AddrPort{7: b}}
	swapped := &fakeTC{backends: []tclb.Backend{{AddrPort: b}, {AddrPort: a, Local: true}}, found: true, slots: map[uint32]netip.AddrPort{7: b}}
	if s1, s2 := state(both, nil), state(swapped, nil); tcMoved(x, s1, s2) != "" {
		t.Errorf("the same frontend read twice moved: %q, %q", s1, s2)
	}
	before := state(&fakeTC{}, nil)
	for _, tc := range []struct {
		name  string
		after *fakeTC
		want  string
	}{
		{"programmed during the probe", both, "changed 172.26.236.177:30080/tcp during the probe: before it, no services map entry; after it, backends [192.168.1.10:8080, 192.168.2.10:8080], Local policy false, 192.168.2.10:8080 at Maglev slot 7"},
		{"a backend fewer", &fakeTC{backends: []tclb.Backend{{AddrPort: a, Local: true}}, found: true, slots: map[uint32]netip.AddrPort{7: a}}, "after it, backends [192.168.1.10:8080], Local policy false, 192.168.1.10:8080 at Maglev slot 7"},
		{"the policy", &fakeTC{backends: both.backends, local: true, found: true, slots: both.slots}, "Local policy true"},
		{"the Maglev table", &fakeTC{backends: both.backends, found: true, slots: map[uint32]netip.AddrPort{7: a}}, "192.168.1.10:8080 at Maglev slot 7"},
		{"no table", &fakeTC{backends: both.backends, found: true}, "no backend at Maglev slot 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := before
			if tc.name != "programmed during the probe" {
				from = state(both, nil)
			}
			if got := tcMoved(x, from, state(tc.after, nil)); !strings.Contains(got, tc.want) {
				t.Errorf("moved %q; want it to say %q", got, tc.want)
			}
		})
	}
	if s := state(&fakeTC{}, fmt.Errorf("node node1: eth0: %w", tclb.ErrNotAttached)); s != "no tc load balancer attached to eth0" {
		t.Errorf("state without a tc load balancer %q", s)
	}
	if _, err := tcState(x, func(string, string) (TCMaps, error) { return nil, errors.New("permission denied") }); err == nil {
		t.Errorf("unreadable maps gave no error")
	}
}

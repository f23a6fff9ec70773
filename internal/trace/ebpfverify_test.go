package trace

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/model"
)

// fakeMaps is a node's socket load balancer maps: frontend/proto → backends.
type fakeMaps struct {
	entries map[string][]netip.AddrPort
	closed  bool
}

func (f *fakeMaps) Lookup(fe netip.AddrPort, proto model.Protocol) ([]netip.AddrPort, bool, error) {
	bes, ok := f.entries[fmt.Sprintf("%s/%s", fe, proto)]
	return bes, ok, nil
}

func (f *fakeMaps) Close() error { f.closed = true; return nil }

func aps(ss ...string) []netip.AddrPort {
	out := []netip.AddrPort{}
	for _, s := range ss {
		out = append(out, netip.MustParseAddrPort(s))
	}
	return out
}

// TestCheckSocket: Verify holds the socket load balancer's decision in the
// trace against its maps on the sender's node: the entry with exactly the
// traced backends (in any order), none for a frontend left to the rules;
// a node with no socket load balancer attached is a difference, not an
// error.
func TestCheckSocket(t *testing.T) {
	vip := netip.MustParseAddrPort("10.96.0.10:80")
	held := func(bes ...string) *SocketLB {
		s := &SocketLB{Hook: "cgroup connect4", Node: "node1", Frontend: vip, Proto: "tcp", Service: "default/web:http/tcp", Held: true, Backends: aps(bes...)}
		if len(bes) > 0 {
			s.Backend = s.Backends[0]
		}
		return s
	}
	left := &SocketLB{Hook: "cgroup connect4", Node: "node1", Frontend: vip, Proto: "tcp", Left: "ClientIP affinity is kept by the nftables rules"}
	key := "10.96.0.10:80/TCP"
	for _, tc := range []struct {
		name    string
		socket  *SocketLB
		entries map[string][]netip.AddrPort
		openErr error
		diff    string // a phrase of the one difference; "" for none
		err     bool
	}{
		{name: "no decision: nothing to check", socket: nil},
		{name: "held, same backends in another order", socket: held("192.168.1.10:8080", "192.168.2.10:8080"),
			entries: map[string][]netip.AddrPort{key: aps("192.168.2.10:8080", "192.168.1.10:8080")}},
		{name: "held, a backend missing", socket: held("192.168.1.10:8080", "192.168.2.10:8080"),
			entries: map[string][]netip.AddrPort{key: aps("192.168.2.10:8080")},
			diff:    "has backends [192.168.2.10:8080], but the trace has it translate it to one of [192.168.1.10:8080, 192.168.2.10:8080]"},
		{name: "held, no entry", socket: held("192.168.1.10:8080"), entries: map[string][]netip.AddrPort{},
			diff: "has no services map entry for 10.96.0.10:80/tcp, but the trace has it translate it to one of [192.168.1.10:8080]"},
		{name: "refused, an empty entry", socket: held(), entries: map[string][]netip.AddrPort{key: {}}},
		{name: "refused, but backends in the map", socket: held(), entries: map[string][]netip.AddrPort{key: aps("192.168.1.10:8080")},
			diff: "has backends [192.168.1.10:8080], but the trace has it refuse the connect (no backends)"},
		{name: "left, no entry", socket: left, entries: map[string][]netip.AddrPort{}},
		{name: "left, but an entry", socket: left, entries: map[string][]netip.AddrPort{key: aps("192.168.1.10:8080")},
			diff: "holds 10.96.0.10:80/tcp (backends [192.168.1.10:8080]), but the trace leaves it to the nftables rules (ClientIP affinity"},
		{name: "not attached", socket: held("192.168.1.10:8080"), openErr: fmt.Errorf("node node1: socklb: cgroup /x: %w: no socklb_connect4 program", socklb.ErrNotAttached),
			diff: "no socket load balancer attached"},
		{name: "the maps cannot be read", socket: held("192.168.1.10:8080"), openErr: errors.New("permission denied"), err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMaps{entries: tc.entries}
			var opened []string
			open := func(node string) (SocketMaps, error) {
				opened = append(opened, node)
				if tc.openErr != nil {
					return nil, tc.openErr
				}
				return m, nil
			}
			diffs, checked, err := checkSocket(&Trace{Socket: tc.socket}, open)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want one: %v", err, tc.err)
			}
			switch {
			case tc.diff == "" && len(diffs) > 0:
				t.Errorf("differences %q, want none", diffs)
			case tc.diff != "" && (len(diffs) != 1 || !strings.Contains(diffs[0], tc.diff)):
				t.Errorf("differences %q, want one saying %q", diffs, tc.diff)
			}
			if ok := tc.socket != nil && tc.diff == "" && !tc.err; ok != (checked != "") {
				t.Errorf("checked %q, want it said: %v", checked, ok)
			}
			if tc.socket != nil && !slices.Equal(opened, []string{"node1"}) {
				t.Errorf("opened the maps of %v, want the sender's node1", opened)
			}
			if tc.socket == nil && len(opened) > 0 {
				t.Errorf("opened the maps of %v with no decision to check", opened)
			}
			if tc.openErr == nil && tc.socket != nil && !m.closed {
				t.Errorf("the maps were left open")
			}
		})
	}
}

// TestProxyCgroup: the cgroup of a node's socket load balancer is read from
// its svcnet proxy's command line.
func TestProxyCgroup(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		path string
		ok   bool
	}{
		{[]string{"/usr/bin/svcnet", "proxy", "--data-plane", "ebpf", "--cgroup", "/svcnet-lab-x/node1"}, "/svcnet-lab-x/node1", true},
		{[]string{"svcnet", "proxy", "--cgroup=/kubepods", "--data-plane=ebpf"}, "/kubepods", true},
		{[]string{"svcnet", "proxy", "--data-plane", "ebpf"}, "/", true},
		{[]string{"svcnet", "proxy", "--data-plane", "nftables"}, "", false},
		{[]string{"svcnet", "proxy"}, "", false},
		{[]string{"svcnet", "lab", "supervise", "--", "svcnet", "proxy", "--data-plane", "ebpf"}, "", false},
		{[]string{"kube-proxy", "--proxy-mode", "nftables"}, "", false},
		{nil, "", false},
	} {
		p, ok := proxyCgroup(tc.argv)
		if p != tc.path || ok != tc.ok {
			t.Errorf("proxyCgroup(%q) = %q, %v; want %q, %v", tc.argv, p, ok, tc.path, tc.ok)
		}
	}
}

// TestExternalOff: a node's svcnet proxy runs its tc load balancer unless
// its command line turns it off.
func TestExternalOff(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		off  bool
	}{
		{[]string{"svcnet", "proxy", "--data-plane", "ebpf"}, false},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--ebpf-external=false"}, true},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--ebpf-external=0"}, true},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--ebpf-external=false", "--ebpf-external"}, false},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--ebpf-external=true"}, false},
		{[]string{"svcnet", "proxy", "--data-plane=nftables", "--ebpf-external=false"}, false},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--", "--ebpf-external=false"}, false},
		{nil, false},
	} {
		if off := externalOff(tc.argv); off != tc.off {
			t.Errorf("externalOff(%q) = %v; want %v", tc.argv, off, tc.off)
		}
	}
}

// TestProxyScheduler: the scheduler a node's svcnet proxy gives Services
// that name none, from its command line, in either flag form; the last one
// wins, and only svcnet proxy on the eBPF plane counts.
func TestProxyScheduler(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"svcnet", "proxy", "--data-plane", "ebpf"}, ""},
		{[]string{"svcnet", "proxy", "--data-plane", "ebpf", "--ebpf-scheduler", "maglev"}, "maglev"},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--ebpf-scheduler=maglev"}, "maglev"},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--ebpf-scheduler=maglev", "--ebpf-scheduler", "rr"}, "rr"},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--ebpf-scheduler"}, ""},
		{[]string{"svcnet", "proxy", "--data-plane=nftables", "--ebpf-scheduler=maglev"}, ""},
		{[]string{"svcnet", "proxy", "--data-plane=ebpf", "--", "--ebpf-scheduler=maglev"}, ""},
		{nil, ""},
	} {
		if got := proxyScheduler(tc.argv); got != tc.want {
			t.Errorf("proxyScheduler(%q) = %q; want %q", tc.argv, got, tc.want)
		}
	}
}

// TestNodeCgroupPath: a cgroup path given for the node is used as is, once
// checked; a node with neither a path nor a namespace cannot be verified.
func TestNodeCgroupPath(t *testing.T) {
	net := &Network{Cgroups: map[string]string{"node1": "/svcnet-lab-x/node1", "node2": "svcnet-lab-x/node2"}}
	if p, err := nodeCgroupPath(net, "node1"); err != nil || p != "/svcnet-lab-x/node1" {
		t.Errorf("node1: %q, %v", p, err)
	}
	if _, err := nodeCgroupPath(net, "node2"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("node2, a relative path: %v, want an error", err)
	}
	if _, err := nodeCgroupPath(net, "node3"); err == nil || !strings.Contains(err.Error(), "give --cgroup node3=PATH") {
		t.Errorf("node3, unknown: %v, want an error naming --cgroup", err)
	}
}

package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/cni/link"
)

func dualConfig(t *testing.T) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"svcnet","subnets":["192.168.1.0/24","fd00:192:168:1::/64"],"dataDir":"/x","dns":{"nameservers":["10.96.0.10"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	att   = attachment{ContainerID: "c1", IfName: "eth0", NetNS: "/run/netns/pod"}
	addrs = []netip.Addr{netip.MustParseAddr("192.168.1.2"), netip.MustParseAddr("fd00:192:168:1::2")}
)

func TestPodSpec(t *testing.T) {
	s := podSpec(dualConfig(t), att, 1400, addrs)
	if s.HostVeth != HostVethName("c1", "eth0") || s.Bridge != "cni0" || s.MTU != 1400 || s.Alias != "svcnet svcnet c1 eth0" || s.NetNS != "/run/netns/pod" {
		t.Fatalf("spec %+v", s)
	}
	if fmt.Sprint(s.Addrs) != "[192.168.1.2/32 fd00:192:168:1::2/128]" {
		t.Fatalf("addrs %v", s.Addrs)
	}
	if fmt.Sprint(s.Routes) != "[0.0.0.0/0 via 192.168.1.1 onlink ::/0 via fd00:192:168:1::1 onlink]" {
		t.Fatalf("routes %v", s.Routes)
	}
	if g := gatewayPrefixes(dualConfig(t).Subnets); fmt.Sprint(g) != "[192.168.1.1/24 fd00:192:168:1::1/64]" {
		t.Fatalf("gateways %v", g)
	}
}

// The result, printed as a runtime reads it, in 1.1.0 and converted to 0.3.1.
func TestBuildResult(t *testing.T) {
	c := dualConfig(t)
	r := buildResult(c, att,
		link.Info{Name: "cni0", MAC: "02:00:00:00:00:01"},
		link.Info{Name: "veth01020304", MAC: "02:00:00:00:00:02", MTU: 1500},
		link.Info{Name: "eth0", MAC: "02:00:00:00:00:03", MTU: 1500}, addrs)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cniVersion":"1.1.0","dns":{"nameservers":["10.96.0.10"]},` +
		`"interfaces":[{"mac":"02:00:00:00:00:01","name":"cni0"},{"mac":"02:00:00:00:00:02","mtu":1500,"name":"veth01020304"},{"mac":"02:00:00:00:00:03","mtu":1500,"name":"eth0","sandbox":"/run/netns/pod"}],` +
		`"ips":[{"address":"192.168.1.2/32","gateway":"192.168.1.1","interface":2},{"address":"fd00:192:168:1::2/128","gateway":"fd00:192:168:1::1","interface":2}],` +
		`"routes":[{"dst":"0.0.0.0/0","gw":"192.168.1.1"},{"dst":"::/0","gw":"fd00:192:168:1::1"}]}`
	if string(b) != want {
		t.Fatalf("result\n%s\nwant\n%s", b, want)
	}
	old, err := r.GetAsVersion("0.3.1")
	if err != nil {
		t.Fatal(err)
	}
	ob, _ := json.Marshal(old)
	if !strings.Contains(string(ob), `"version":"4"`) || !strings.Contains(string(ob), `"cniVersion":"0.3.1"`) {
		t.Fatalf("0.3.1 result %s", ob)
	}
	if got := addrsOfResult(r); fmt.Sprint(got) != fmt.Sprint(addrs) {
		t.Fatalf("addrsOfResult %v", got)
	}
}

// verify passes on the state ADD leaves and names each kind of drift.
func TestVerify(t *testing.T) {
	c := dualConfig(t)
	host := link.Info{Name: HostVethName("c1", "eth0"), Index: 7, Kind: "veth", MTU: 1500, Up: true, Master: 3, Alias: Alias("svcnet", "c1", "eth0")}
	pod := link.Info{Name: "eth0", Index: 2, Kind: "veth", MAC: "02:00:00:00:00:03", MTU: 1500, Up: true, Alias: host.Alias}
	bridge := link.Info{Name: "cni0", Index: 3, Kind: "bridge", Up: true}
	prev := buildResult(c, att, bridge, host, pod, addrs)
	// Round trip through JSON as a runtime's cached result would.
	b, _ := json.Marshal(prev)
	parsed, err := types100.NewResult(b)
	if err != nil {
		t.Fatal(err)
	}
	prev = parsed.(*types100.Result)
	good := func() observed {
		return observed{
			Pod: link.PodState{Link: pod, LoopbackUp: true,
				Addrs:  []netip.Prefix{netip.MustParsePrefix("192.168.1.2/32"), netip.MustParsePrefix("fd00:192:168:1::2/128"), netip.MustParsePrefix("fe80::1/64")},
				Routes: podSpec(c, att, 1500, addrs).Routes},
			Host: host, Bridge: bridge,
			BridgeAddrs: gatewayPrefixes(c.Subnets),
			Owned:       addrs,
		}
	}
	if bad := verify(c, att, prev, good()); len(bad) != 0 {
		t.Fatalf("verify of a good attachment: %v", bad)
	}
	for _, tc := range []struct {
		name   string
		change func(*observed)
		want   string
	}{
		{"pod missing", func(o *observed) { o.PodErr = fmt.Errorf("interface eth0: %w", link.ErrNotFound) }, "pod interface: interface eth0: link not found"},
		{"pod down", func(o *observed) { o.Pod.Link.Up = false }, "pod interface eth0 is down"},
		{"mac", func(o *observed) { o.Pod.Link.MAC = "02:00:00:00:00:99" }, "has MAC 02:00:00:00:00:99"},
		{"mtu", func(o *observed) { o.Pod.Link.MTU = 1400 }, "has MTU 1400, prevResult says 1500"},
		{"address", func(o *observed) { o.Pod.Addrs = o.Pod.Addrs[1:] }, "address 192.168.1.2/32 is missing"},
		{"route", func(o *observed) { o.Pod.Routes = o.Pod.Routes[:1] }, "route ::/0 via fd00:192:168:1::1 is missing"},
		{"loopback", func(o *observed) { o.Pod.LoopbackUp = false }, "pod loopback is down"},
		{"foreign pod interface", func(o *observed) { o.Pod.Link.Alias = "" }, `has alias ""`},
		{"host missing", func(o *observed) { o.HostErr = errors.New("gone") }, "node end: gone"},
		{"host off bridge", func(o *observed) { o.Host.Master = 0 }, "is not a port of bridge cni0"},
		{"host down", func(o *observed) { o.Host.Up = false }, "is down"},
		{"bridge gateway", func(o *observed) { o.BridgeAddrs = o.BridgeAddrs[:1] }, "bridge cni0 lacks gateway address fd00:192:168:1::1/64"},
		{"ipam", func(o *observed) { o.Owned = o.Owned[:1] }, "address fd00:192:168:1::2 is not allocated to c1/eth0 in /x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.change(&o)
			bad := verify(c, att, prev, o)
			if !strings.Contains(strings.Join(bad, "; "), tc.want) {
				t.Fatalf("verify = %q, want it to mention %q", bad, tc.want)
			}
		})
	}
}

package sim

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestRedirect: a redirect is a dnat to a local address the kernel chooses
// (nf_nat_redirect): the input interface's primary address for a received
// packet, loopback for a locally generated one, a drop when the interface
// has no address of the family; the reply is un-translated by conntrack.
func TestRedirect(t *testing.T) {
	rule := func(proto uint8) *nft.Rule {
		return nft.R(nft.ProtoMatch{Proto: proto}, nft.PortMatch{Field: nft.FieldDport, Port: 80}, nft.Redirect{Port: 40080})
	}
	addrs := map[string]string{"eth0/ip": "172.26.236.177", "eth0/ip6": "fd00:26:236::177", "cbr0/ip": "192.168.1.1"}
	ifaceAddr := func(name string, f ipfamily.Family) netip.Addr {
		a, _ := netip.ParseAddr(addrs[name+"/"+nft.Keyword(f)])
		return a
	}
	for _, tc := range []struct {
		name    string
		fam     ipfamily.Family
		path    Path
		iface   string
		src     string
		dst     string
		proto   uint8
		want    Verdict
		wantDst string // after the redirect
	}{
		{"from outside on eth0", ipfamily.IPv4, PathPrerouting, "eth0", "172.26.236.10:5555", "10.96.0.1:80", nft.ProtoTCP, Accepted, "172.26.236.177:40080"},
		{"from a pod on the bridge", ipfamily.IPv4, PathPrerouting, "cbr0", "192.168.1.10:5555", "10.96.0.1:80", nft.ProtoUDP, Accepted, "192.168.1.1:40080"},
		{"IPv6 from outside", ipfamily.IPv6, PathPrerouting, "eth0", "[fd00:26:236::10]:5555", "[fd00:96::1]:80", nft.ProtoTCP, Accepted, "[fd00:26:236::177]:40080"},
		{"locally generated", ipfamily.IPv4, PathOutput, "", "172.26.236.177:5555", "10.96.0.1:80", nft.ProtoTCP, Accepted, "127.0.0.1:40080"},
		{"locally generated IPv6", ipfamily.IPv6, PathOutput, "", "[fd00:26:236::177]:5555", "[fd00:96::1]:80", nft.ProtoTCP, Accepted, "[::1]:40080"},
		{"interface without an address of the family", ipfamily.IPv6, PathPrerouting, "cbr0", "[fd00:192:168:1::10]:5555", "[fd00:96::1]:80", nft.ProtoTCP, Dropped, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := "prerouting"
			if tc.path == PathOutput {
				hook = "output"
			}
			tbl := table(tc.fam, "t", []*nft.Chain{base("n", "nat", hook, -100, rule(tc.proto))})
			s := New(nil, tbl)
			ctx := Context{Path: tc.path, InIface: tc.iface, IfaceAddr: ifaceAddr,
				LocalAddrs: []netip.Addr{netip.MustParseAddr("172.26.236.177"), netip.MustParseAddr("fd00:26:236::177"), netip.MustParseAddr("192.168.1.1")}}
			p := Packet{Family: tc.fam, Proto: tc.proto, Src: netip.MustParseAddrPort(tc.src), Dst: netip.MustParseAddrPort(tc.dst)}
			res, err := s.Run(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s\n%s", res.Verdict, tc.want, renderTrace(res.Trace))
			}
			if tc.want != Accepted {
				return
			}
			if got := res.Final.Dst.String(); got != tc.wantDst || res.Delivery != DeliverLocal {
				t.Errorf("delivered %s to %s, want local to %s\n%s", res.Delivery, got, tc.wantDst, renderTrace(res.Trace))
			}
			var red *Step
			for i := range res.Trace {
				if res.Trace[i].Action == ActDNAT {
					red = &res.Trace[i]
				}
			}
			if red == nil || !strings.HasPrefix(red.Detail, "redirect: ") || red.Text != rule(tc.proto).Render(tc.fam) {
				t.Errorf("redirect step %+v\n%s", red, renderTrace(res.Trace))
			}
			// The reply from the proxy port comes back from the address
			// the client sent to.
			reply := Packet{Family: tc.fam, Proto: tc.proto, Src: res.Final.Dst, Dst: p.Src}
			rctx := Context{Path: PathOutput, LocalAddrs: ctx.LocalAddrs}
			back, err := s.Run(rctx, reply)
			if err != nil {
				t.Fatal(err)
			}
			if back.Final.Src != p.Dst {
				t.Errorf("reply leaves from %s, want %s\n%s", back.Final.Src, p.Dst, renderTrace(back.Trace))
			}
		})
	}
	t.Run("in a filter chain", func(t *testing.T) {
		tbl := table(ipfamily.IPv4, "t", []*nft.Chain{base("b", "filter", "prerouting", 0, rule(nft.ProtoTCP))})
		p := Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: netip.MustParseAddrPort("10.96.0.1:80")}
		if _, err := New(nil, tbl).Run(Context{Path: PathPrerouting, InIface: "eth0", IfaceAddr: ifaceAddr}, p); err == nil || !strings.Contains(err.Error(), "redirect in base chain b") {
			t.Errorf("Run = %v, want a refusal", err)
		}
	})
}

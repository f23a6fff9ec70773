package iptables

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/nft/nftrace"
	"github.com/svcnet/svcnet/internal/nft/sim"
)

// TestKernelTranslate programs the rendered feature table with
// iptables-nft-restore (and the Jumps) in a throwaway namespace, reads it
// back with iptables-save (ReadKernel) and the kernel's handles over
// netlink (AdoptHandles), and checks: the read-back translates to the same
// rules as the rendering, chain for chain; every rule has its kernel
// handle; the simulator over the read-back gives every IPv4 feature row
// the fates the interpreter gives; and a real packet's nftrace events (the
// node's own connection to a ClusterIP, through nat OUTPUT and
// POSTROUTING) name the chains and rules, by handle, that the simulator
// walks for the endpoint the kernel chose.
func TestKernelTranslate(t *testing.T) {
	ns := netnstest.New(t, "ipt-trace")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := "172.26.236.177"
	for _, argv := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", "va", "type", "veth", "peer", "name", "vb"},
		{"ip", "link", "set", "va", "up"},
		{"ip", "link", "set", "vb", "up"},
		{"ip", "addr", "add", node + "/24", "dev", "va"},
		{"ip", "route", "add", "default", "via", "172.26.236.1", "dev", "va", "onlink"},
	} {
		if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	rs := Render(featureTable(t, testNode()), ipfamily.IPv4)
	restoreIn(t, ns, ipfamily.IPv4, rs.Full())
	restoreIn(t, ns, ipfamily.IPv4, jumpRestore())

	read, err := ReadKernel(ctx, kernel(ns), ipfamily.IPv4)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := netlink.New(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tb := range read {
		k, err := conn.Read(ctx, tb.Family, tb.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := AdoptHandles(tb, k); err != nil {
			t.Fatal(err)
		}
		if tb.Handle == 0 {
			t.Errorf("table %s: no kernel handle", tb.Name)
		}
	}
	rendered, err := Rules{Families: []ipfamily.Family{ipfamily.IPv4}}.Render(featureTable(t, testNode()))
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != len(rendered) {
		t.Fatalf("%d tables read back, %d rendered", len(read), len(rendered))
	}
	for i, want := range rendered {
		got := read[i]
		if got.Name != want.Name || !slices.Equal(got.ChainNames(), want.ChainNames()) {
			t.Fatalf("table %s: chains read back\n%v\nrendered\n%v", want.Name, got.ChainNames(), want.ChainNames())
		}
		for _, name := range want.ChainNames() {
			var g, w []string
			for _, r := range got.Chains[name].Rules {
				g = append(g, r.Source)
				if r.Handle == 0 {
					t.Errorf("table %s chain %s: %s has no handle", got.Name, name, r.Source)
				}
			}
			for _, r := range want.Chains[name].Rules {
				w = append(w, r.Source)
			}
			if !slices.Equal(g, w) {
				t.Errorf("table %s chain %s: read back\n%s\nrendered\n%s", got.Name, name, strings.Join(g, "\n"), strings.Join(w, "\n"))
			}
		}
	}

	local := ips(node, "192.168.1.1")
	for _, tc := range featureRows {
		dst := ap(tc.dst)
		if !dst.Addr().Is4() {
			continue
		}
		s := sim.New(nil, read...)
		ctx := sim.Context{LocalAddrs: local, Path: sim.PathPrerouting, InIface: "eth0",
			EgressAddr: func(netip.Addr) netip.Addr { return local[0] }}
		if tc.output {
			ctx.Path, ctx.InIface = sim.PathOutput, ""
		}
		proto, _ := nft.ProtoNumber(tc.proto)
		outs, err := s.Enumerate(ctx, sim.Packet{Family: ipfamily.IPv4, Proto: proto, Src: tc.src, Dst: dst})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, o := range outs {
			got = append(got, simFate(o.Result)+" "+o.Probability.RatString())
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: fates over the read-back\n got  %s\n want %s", tc.name, strings.Join(got, "\n      "), strings.Join(tc.want, "\n      "))
		}
	}

	kernelTraceAgrees(t, ns, read, netip.MustParseAddrPort("10.96.0.20:80"), local)
}

// kernelTraceAgrees connects from ns (the node) to svc with nftrace armed,
// and checks the kernel's rule events in the nat table against the
// simulator's walk of the packet over tables to the endpoint the kernel
// chose: the same chains and rules (by index, through the handles), with
// the same verdicts.
func kernelTraceAgrees(t *testing.T, ns *netns.NS, tables []*nft.Table, svc netip.AddrPort, local []netip.Addr) {
	t.Helper()
	l, err := nftrace.Listen(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := nftrace.Arm(ns, "ipt-trace-test", []nftrace.Match{{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Dst: nft.Host(svc.Addr()), Dport: svc.Port()}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// The DNATed SYN leaves on va towards an endpoint nobody answers for:
	// the connection times out, the trace is complete.
	err = ns.Do(func() error {
		c, err := net.DialTimeout("tcp", svc.String(), 300*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	evs, err := l.Collect(ctx, 300*time.Millisecond, 1000)
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	var nat *nft.Table
	for _, tb := range tables {
		if tb.Name == TableNAT {
			nat = tb
		}
	}
	handles := nftrace.HandlesOf(nat)
	var kernel []string
	chosen := ""
	for _, e := range evs {
		if e.Table != TableNAT || e.Type != nftrace.TypeRule || e.Handle == 0 { // rules only, not chain ends
			continue
		}
		i := handles.Index(e.Chain, e.Handle)
		kernel = append(kernel, fmt.Sprintf("%s #%d %s", e.Chain, i, e.Verdict.Code))
		if strings.HasPrefix(e.Chain, prefixEndpoint) && e.Verdict.Code == nftrace.Accept {
			chosen = e.Chain
		}
	}
	if chosen == "" {
		t.Fatalf("no DNAT among the kernel's events:\n%s", strings.Join(kernel, "\n"))
	}
	// The simulated walk that goes through the chosen endpoint's chain.
	s := sim.New(nil, tables...)
	sctx := sim.Context{LocalAddrs: local, Path: sim.PathOutput, EgressAddr: func(netip.Addr) netip.Addr { return local[0] }}
	outs, err := s.Enumerate(sctx, sim.Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: netip.AddrPortFrom(local[0], 40000), Dst: svc})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, o := range outs {
		var steps []string
		through := false
		for _, st := range o.Result.Trace {
			if st.Table != TableNAT || st.Rule < 0 {
				continue
			}
			v := ""
			switch st.Action {
			case sim.ActJump:
				v = "jump"
			case sim.ActDNAT, sim.ActMasquerade, sim.ActAccept:
				v = "accept"
			case sim.ActContinue:
				v = "continue"
			case sim.ActReturn:
				v = "return"
			default:
				continue
			}
			steps = append(steps, fmt.Sprintf("%s #%d %s", st.Chain, st.Rule, v))
			through = through || st.Chain == chosen
		}
		if through {
			want = steps
		}
	}
	if !slices.Equal(kernel, want) {
		t.Fatalf("the kernel's nat rule events\n%s\nthe simulator's walk to %s\n%s", strings.Join(kernel, "\n"), chosen, strings.Join(want, "\n"))
	}
}

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbin"

	iptplane "github.com/svcnet/svcnet/internal/dataplane/iptables"

	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/trace"
)

// egressPort is where the outside server listens in the lab's client
// namespace.
const egressPort = 9090

// outsideServer is a TCP server in the lab's client namespace, which is on
// the node network but outside the cluster: its default route is the
// fabric's gateway, which forwards nothing, so it can answer a pod only if
// the pod's traffic comes from a node's address. Each connection gets the
// source address it came from, one line, and is closed.
type outsideServer struct {
	l  net.Listener
	wg sync.WaitGroup
}

func startOutsideServer(t *testing.T, e *env) *outsideServer {
	t.Helper()
	s := &outsideServer{}
	err := netns.DoNamed(e.l.Names().Client(), func() error {
		var err error
		s.l, err = net.Listen("tcp", netip.AddrPortFrom(topology.ClientAddr, egressPort).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen in the client namespace: %v", err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = fmt.Fprintf(c, "%s\n", c.RemoteAddr())
			c.Close()
		}
	}()
	t.Cleanup(func() { s.l.Close(); s.wg.Wait() })
	return s
}

// seenFrom connects with dial (from a lab place) to the outside server and
// returns the source address the server saw.
func seenFrom(ctx context.Context, dial echo.DialFunc) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := dial(ctx, "tcp", netip.AddrPortFrom(topology.ClientAddr, egressPort).String())
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return netip.Addr{}, err
	}
	ap, err := netip.ParseAddrPort(strings.TrimSpace(line))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("server answered %q: %w", line, err)
	}
	return ap.Addr().Unmap(), nil
}

// egressScenarios: pods reach a host outside the cluster (the lab client)
// with their node's address (svcnet proxy's egress masquerade, on by
// default), while pod-to-pod traffic across nodes keeps the pod's address;
// svcnet trace --verify shows the egress masquerade hop, and the kernel's
// own trace agrees, through the library and the CLI.
func egressScenarios(t *testing.T, e *env) {
	startOutsideServer(t, e)
	for _, tc := range []struct {
		from string
		node int
	}{{"client-1", 1}, {"client-3", 3}, {"web-2", 2}} {
		t.Run("outside from "+tc.from, func(t *testing.T) {
			dial := e.dialer(tc.from)
			// The first connection may wait for the node's neighbour
			// entry of the client; a few tries bound it.
			var got netip.Addr
			var err error
			for try := 0; try < 5; try++ {
				if got, err = seenFrom(e.ctx, dial); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("pod %s to the outside server %s:%d: %v", tc.from, topology.ClientAddr, egressPort, err)
			}
			if want := topology.NodeAddr(tc.node); got != want {
				t.Errorf("the outside server saw %s from pod %s, want its node%d's address %s", got, tc.from, tc.node, want)
			}
		})
	}
	t.Run("pod to pod across nodes", func(t *testing.T) {
		web2 := e.pod("web-2")
		pods, clients := answered(t, "client-1 to web-2", e.curl("client-1", fmt.Sprintf("http://%s/", web2.Status.PodIP), 3, 2*time.Second))
		if err := onlyKeys(pods, "web-2"); err != nil {
			t.Fatal(err)
		}
		if err := onlyKeys(clients, e.pod("client-1").Status.PodIP); err != nil {
			t.Errorf("web-2 did not see client-1's own address: %v", err)
		}
	})
	t.Run("trace --verify", func(t *testing.T) {
		tr, out := verifyTrace(t, e, trace.Ask{From: "client-1", To: fmt.Sprintf("client:%d", egressPort)})
		if tr.Verdict.Kind != trace.Delivered || tr.Summary.Rewrites != 1 || len(tr.Reply) == 0 {
			t.Fatalf("verdict %s, %d rewrites, %d reply hops; want delivered, 1 (the egress SNAT), a reply\n%s", tr.Verdict.Kind, tr.Summary.Rewrites, len(tr.Reply), out)
		}
		for _, h := range tr.Hops {
			for _, rw := range h.Rewrites {
				// The egress chain: the nftables and userspace planes'
				// egress-masquerading, the iptables plane's SVCNET-EGRESS-MASQ.
				egress := strings.Contains(rw.By, "egress-masquerading") || strings.Contains(rw.By, iptplane.ChainEgressMasq)
				if rw.Kind != trace.RewriteSNAT || !egress || rw.After.Src.Addr() != topology.NodeAddr(1) {
					t.Errorf("rewrite %s by %s to %s: want the egress masquerade to node1's address\n%s", rw.Kind, rw.By, rw.After, out)
				}
			}
		}
		if !strings.Contains(out, "egress masquerade: a pod's traffic leaving the cluster leaves with the node's address") {
			t.Errorf("the text does not explain the egress masquerade:\n%s", out)
		}
	})
	t.Run("svcnet lab trace --verify", func(t *testing.T) {
		name, reopen := e.release(t)
		defer reopen()
		to := netip.AddrPortFrom(topology.ClientAddr, egressPort).String()
		chain := "egress-masquerading" // the nftables and userspace planes'
		if testbin.DataPlane() == iptplane.Name {
			chain = iptplane.ChainEgressMasq
		}
		out := labTraceVerify(t, e, name, "client-1", to,
			chain, "SNAT ", "un-SNAT", "summary: 1 rewrite on the way in (SNAT at node1)")
		t.Logf("svcnet lab trace client-1 %s --verify:\n%s", to, out)
	})
}

package netlink

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
)

func run(t *testing.T, ns *netns.NS, argv ...string) {
	t.Helper()
	if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// serve listens on addr inside ns and answers each connection with its own
// address; it stops when the test ends.
func serve(t *testing.T, ns *netns.NS, addr string) {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return // listener closed
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = fmt.Fprintf(c, "%s\n", addr)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
}

// TestTrafficDNAT programs a Service-shaped table in a client namespace and
// connects to the virtual IP: the nat output chain's verdict map, numgen
// cascade and DNAT must bring the connection to the listeners in a server
// namespace behind a veth pair.
func TestTrafficDNAT(t *testing.T) {
	cli := netnstest.New(t, "nlcli")
	srv := netnstest.New(t, "nlsrv")
	run(t, cli, "ip", "link", "add", "c0", "type", "veth", "peer", "name", "s0", "netns", srv.Name())
	run(t, cli, "ip", "addr", "add", "10.200.0.1/24", "dev", "c0")
	run(t, cli, "ip", "link", "set", "c0", "up")
	run(t, cli, "ip", "route", "add", "10.96.0.0/12", "via", "10.200.0.2")
	run(t, srv, "ip", "addr", "add", "10.200.0.2/24", "dev", "s0")
	run(t, srv, "ip", "link", "set", "s0", "up")
	eps := []string{"10.200.0.2:8080", "10.200.0.2:8081"}
	for _, ep := range eps {
		serve(t, srv, ep)
	}

	c, err := New(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	key := []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}
	tx := nft.NewTx(ipfamily.IPv4, "svcnet")
	tx.AddTable()
	tx.AddSet(&nft.Set{Name: "service-ips", Key: key, Verdict: true})
	tx.AddChain(&nft.Chain{Name: "nat-output", Hook: &nft.Hook{Type: "nat", Hook: "output", Priority: -100}})
	for _, n := range []string{"services", "svc/default/web:http", "ep0", "ep1"} {
		tx.AddChain(&nft.Chain{Name: n})
	}
	tx.AddRule("nat-output", nft.R(nft.JumpTo("services")))
	tx.AddRule("services", nft.R(nft.VMap{Fields: key, Map: "service-ips"}))
	tx.AddRule("svc/default/web:http", nft.R(nft.Random{Mod: 2, Value: 0}, nft.GotoTo("ep0")))
	tx.AddRule("svc/default/web:http", nft.R(nft.GotoTo("ep1")))
	for i, ep := range eps {
		tx.AddRule(fmt.Sprintf("ep%d", i), nft.R(nft.Counter{}, nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.DNAT{To: netip.MustParseAddrPort(ep)}))
	}
	tx.AddElements("service-ips", nft.Element{
		Key:     []nft.Value{nft.A(netip.MustParseAddr("10.96.0.10")), nft.N(nft.ProtoTCP), nft.N(80)},
		Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "svc/default/web:http"},
	})
	if err := c.Apply(ctx, tx); err != nil {
		t.Fatal(err)
	}

	hits := map[string]int{}
	for i := range 32 {
		var answer string
		err := cli.Do(func() error {
			conn, err := net.DialTimeout("tcp", "10.96.0.10:80", 3*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
			answer, err = bufio.NewReader(conn).ReadString('\n')
			return err
		})
		if err != nil {
			t.Fatalf("connect %d to the virtual IP: %v", i, err)
		}
		hits[strings.TrimSpace(answer)]++
	}
	t.Logf("answers: %v", hits)
	for _, ep := range eps {
		if hits[ep] == 0 {
			t.Errorf("endpoint %s never chosen in 32 connections: %v", ep, hits)
		}
	}
}

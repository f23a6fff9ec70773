package datapathbench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func ipIn(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// httpIn serves HTTP 200 on addr inside ns and counts the requests.
func httpIn(t *testing.T, ns *netns.NS, addr string) *atomic.Int64 {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		fmt.Fprintln(w, "ok")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return n
}

// measurePair loads both sides of a pair in turns, each from its own
// namespace to its own address: a client namespace and a server namespace
// joined by a veth, the direct side on port 8080 and the "Service" side on
// port 8081 of the same server (an A/A pair: both rates alike). A side that
// answers nothing fails the pair, naming its address.
func TestMeasurePair(t *testing.T) {
	cli := netnstest.New(t, "dp-pair-cli")
	srv := netnstest.New(t, "dp-pair-srv")
	ipIn(t, "-n", cli.Name(), "link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", srv.Name())
	ipIn(t, "-n", cli.Name(), "addr", "add", "10.99.0.1/24", "dev", "v0")
	ipIn(t, "-n", srv.Name(), "addr", "add", "10.99.0.2/24", "dev", "v1")
	for _, ns := range []*netns.NS{cli, srv} {
		ipIn(t, "-n", ns.Name(), "link", "set", "lo", "up")
	}
	ipIn(t, "-n", cli.Name(), "link", "set", "v0", "up")
	ipIn(t, "-n", srv.Name(), "link", "set", "v1", "up")
	if err := tuneClient(cli); err != nil {
		t.Fatal(err)
	}
	// The client takes no ICMP redirect, on any interface (load.go).
	if err := cli.Do(func() error {
		for _, f := range []string{"all", "default", "v0", "lo"} {
			b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + f + "/accept_redirects")
			if err != nil || strings.TrimSpace(string(b)) != "0" {
				t.Errorf("accept_redirects of %s in the client: %q, %v", f, b, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	direct, service := httpIn(t, srv, "10.99.0.2:8080"), httpIn(t, srv, "10.99.0.2:8081")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tg := target{path: "test", directNS: cli, serviceNS: cli, directAddr: "10.99.0.2:8080", svcAddr: "10.99.0.2:8081"}
	const d = 100 * time.Millisecond
	for first := range 2 {
		n0, n1 := direct.Load(), service.Load()
		ds, ss, err := measurePair(ctx, tg, d, first)
		if err != nil {
			t.Fatalf("first %d: %v", first, err)
		}
		for side, s := range map[string]sample{"direct": ds, "service": ss} {
			if s.keepAlive <= 0 || s.newConn <= 0 || len(s.probe) == 0 || len(s.connect) == 0 || s.errors != 0 {
				t.Errorf("first %d: %s side: ka %.0f/s nc %.0f/s, %d probes, %d connects, %d errors (%v)",
					first, side, s.keepAlive, s.newConn, len(s.probe), len(s.connect), s.errors, s.firstErr)
			}
		}
		// Each side's requests reached its own port: at least the answers it
		// counted (its rate over about d, less a margin for the turns'
		// timer), and both sides alike.
		got := [2]int64{direct.Load() - n0, service.Load() - n1}
		for i, s := range []sample{ds, ss} {
			if want := int64((s.keepAlive + s.newConn) * d.Seconds() * 0.8); got[i] < want {
				t.Errorf("first %d: side %d's port served %d requests, want >= %d (ka %.0f/s, nc %.0f/s over %s)", first, i, got[i], want, s.keepAlive, s.newConn, d)
			}
		}
		if r := ss.keepAlive / ds.keepAlive; r < 0.5 || r > 2 {
			t.Errorf("first %d: A/A keep-alive ratio %.3f (direct %.0f/s, service %.0f/s)", first, r, ds.keepAlive, ss.keepAlive)
		}
	}
	tg.svcAddr = "10.99.0.2:8082" // nothing listens
	if _, _, err := measurePair(ctx, tg, d, 0); err == nil || !strings.Contains(err.Error(), "10.99.0.2:8082") || !strings.Contains(err.Error(), "no request succeeded") {
		t.Errorf("closed Service side: err = %v", err)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/dns"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/logtest"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// resolveFixture is default/my-nginx (ClusterIP 10.96.0.20, port http 80)
// and default/big, headless with 100 ready endpoints (too many for 512 bytes).
func resolveFixture() *model.Store {
	s := model.NewStore()
	s.Update(func(tx *model.Txn) {
		tx.SetService(&model.Service{Namespace: "default", Name: "my-nginx", Type: model.ServiceTypeClusterIP,
			ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.20")}, IPFamilies: []ipfamily.Family{ipfamily.IPv4},
			Ports: []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80, TargetPort: 80}}})
		tx.SetService(&model.Service{Namespace: "default", Name: "big", Type: model.ServiceTypeClusterIP, Headless: true,
			IPFamilies: []ipfamily.Family{ipfamily.IPv4}})
		sl := &model.EndpointSlice{Namespace: "default", Name: "big-1", Service: "big", AddressType: ipfamily.IPv4}
		for i := range 100 {
			sl.Endpoints = append(sl.Endpoints, model.Endpoint{
				Addresses: []netip.Addr{netip.AddrFrom4([4]byte{192, 168, 1, byte(i + 1)})}, Ready: true, Serving: true})
		}
		tx.SetEndpointSlice(sl)
		tx.SetSynced(true)
	})
	return s
}

// startDNS runs a DNS server for store on listen until the test ends and
// returns its address once it answers from the store.
func startDNS(t *testing.T, listen string, store *model.Store) (string, error) {
	t.Helper()
	srv, err := dns.NewServer(dns.ServerConfig{Listen: listen, Logger: (&logtest.Sink{}).Logger(0)}, store)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx) }()
	select {
	case err := <-errc:
		cancel()
		return "", err
	case <-srv.Started():
	case <-time.After(5 * time.Second):
		cancel()
		t.Fatal("dns server did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("dns server: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("dns server did not stop")
		}
	})
	for i := 0; i < 500 && !srv.Ready(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !srv.Ready() {
		t.Fatal("dns server not ready")
	}
	return srv.Addr().String(), nil
}

// writeResolvConf writes a lab pod's resolv.conf naming nameserver.
func writeResolvConf(t *testing.T, nameserver string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "resolv.conf")
	text := fmt.Sprintf("nameserver %s\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", nameserver)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolve(t *testing.T) {
	addr, err := startDNS(t, "127.0.0.1:0", resolveFixture())
	if err != nil {
		t.Fatal(err)
	}
	// resolv.conf gives search and ndots; --server the test server's port
	// (resolv.conf's nameserver lines take no port).
	conf := writeResolvConf(t, "127.0.0.1")
	resolve := func(args ...string) (string, string, int) {
		return run(t, append([]string{"resolve", "--resolv-conf", conf, "--server", addr}, args...)...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"my-nginx"}, "10.96.0.20\n"},
		{[]string{"my-nginx.default"}, "10.96.0.20\n"},
		{[]string{"MY-NGINX.default.svc.cluster.local."}, "10.96.0.20\n"},
		{[]string{"-t", "PTR", "10.96.0.20"}, "my-nginx.default.svc.cluster.local.\n"},
		{[]string{"-t", "txt", "dns-version"}, "\"1.1.0\"\n"},
	} {
		out, errOut, code := resolve(tc.args...)
		if code != 0 || out != tc.want {
			t.Errorf("resolve %q: exit %d, %q (stderr %q); want %q", tc.args, code, out, errOut, tc.want)
		}
	}
	out, errOut, code := resolve("-t", "SRV", "_http._tcp.my-nginx")
	if code != 0 || !strings.HasSuffix(out, " 80 my-nginx.default.svc.cluster.local.\n") {
		t.Errorf("resolve SRV: exit %d, %q (stderr %q)", code, out, errOut)
	}
	// 100 records do not fit 512 bytes: the answer comes truncated over UDP,
	// then whole over TCP.
	out, errOut, code = resolve("big")
	if lines := strings.Count(out, "\n"); code != 0 || lines != 100 {
		t.Errorf("resolve big: exit %d, %d lines (stderr %q); want 100", code, lines, errOut)
	}
	// NXDOMAIN everywhere: exit 1 naming every name tried.
	_, errOut, code = resolve("nope")
	if code != 1 {
		t.Errorf("resolve nope: exit %d, want 1", code)
	}
	for _, n := range []string{"nope.default.svc.cluster.local. (NXDOMAIN)", "nope.svc.cluster.local. (NXDOMAIN)", "nope.cluster.local. (NXDOMAIN)", "nope. ("} {
		if !strings.Contains(errOut, n) {
			t.Errorf("resolve nope: message %q does not name %s", errOut, n)
		}
	}
	// NODATA: the name exists without AAAA.
	_, errOut, code = resolve("-t", "AAAA", "my-nginx")
	if code != 1 || !strings.Contains(errOut, "my-nginx.default.svc.cluster.local. (NODATA)") {
		t.Errorf("resolve -t AAAA my-nginx: exit %d, %q; want 1 and NODATA named", code, errOut)
	}
	if _, errOut, code = resolve("-t", "BOGUS", "my-nginx"); code == 0 || !strings.Contains(errOut, "BOGUS") {
		t.Errorf("resolve -t BOGUS: exit %d, %q", code, errOut)
	}
	if _, errOut, code = run(t, "resolve", "--server", "dns.example", "my-nginx"); code == 0 || !strings.Contains(errOut, "--server") {
		t.Errorf("resolve --server dns.example: exit %d, %q", code, errOut)
	}
}

// TestResolveUsesResolvConfNameserver: without --server the nameserver of
// resolv.conf is asked, on port 53 (a socket on a loopback address of the
// host's 127/8; binding port 53 takes root).
func TestResolveUsesResolvConfNameserver(t *testing.T) {
	netnstest.RequireRoot(t)
	store := resolveFixture()
	var ip string
	for i := 0; ; i++ {
		ip = netip.AddrFrom4([4]byte{127, 53, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250))}).String()
		_, err := startDNS(t, net.JoinHostPort(ip, "53"), store)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || i >= 10 {
			t.Fatal(err)
		}
	}
	out, errOut, code := run(t, "resolve", "--resolv-conf", writeResolvConf(t, ip), "my-nginx")
	if code != 0 || out != "10.96.0.20\n" {
		t.Errorf("resolve my-nginx via %s: exit %d, %q (stderr %q)", ip, code, out, errOut)
	}
}

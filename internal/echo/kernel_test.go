package echo_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func run(t *testing.T, ns *netns.NS, argv ...string) {
	t.Helper()
	if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s in %s: %v: %s", strings.Join(argv, " "), ns.Name(), err, out)
	}
}

// The server runs in a pod namespace (Serve inside NS.Do, default pod IP and
// wildcard dual-stack sockets), the client in another namespace joined by a
// veth; JSON, line and UDP answers name the addresses each side really used.
func TestKernelServeInNamespace(t *testing.T) {
	pod := netnstest.New(t, "echo-pod")
	cli := netnstest.New(t, "echo-cli")
	run(t, pod, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", cli.Name())
	run(t, pod, "ip", "addr", "add", "192.168.1.5/24", "dev", "eth0")
	run(t, pod, "ip", "addr", "add", "fd00:192:168:1::5/64", "dev", "eth0", "nodad")
	run(t, pod, "ip", "link", "set", "eth0", "up")
	run(t, cli, "ip", "addr", "add", "192.168.1.1/24", "dev", "eth0")
	run(t, cli, "ip", "addr", "add", "fd00:192:168:1::1/64", "dev", "eth0", "nodad")
	run(t, cli, "ip", "link", "set", "eth0", "up")

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- pod.Do(func() error {
			return echo.Serve(ctx, echo.Config{Name: "pod-a", Node: "node1", TCP: []int{8080}, UDP: []int{8081},
				Ready: func(_, _ []net.Addr) { close(ready) }}, klog.Background())
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server not ready")
	}

	tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer tcancel()
	dial := netns.Dialer(cli)
	for _, tc := range []struct{ server, client string }{
		{"192.168.1.5", "192.168.1.1"},
		{"fd00:192:168:1::5", "fd00:192:168:1::1"},
	} {
		hp := net.JoinHostPort(tc.server, "8080")
		r, err := echo.Get(tctx, dial, "http://"+hp+"/")
		if err != nil {
			t.Fatal(err)
		}
		if r.Pod != "pod-a" || r.Node != "node1" || r.PodIP != "192.168.1.5" || r.Server != hp || hostOf(r.Client) != tc.client {
			t.Errorf("GET / via %s = %+v; want pod-a/node1, podIP 192.168.1.5, server %s, client %s:*", tc.server, r, hp, tc.client)
		}
		if got, err := echo.TCPLine(tctx, dial, hp, "clientip"); err != nil || hostOf(got) != tc.client {
			t.Errorf("tcp clientip via %s = %q, %v; want %s:*", tc.server, got, err, tc.client)
		}
		up := net.JoinHostPort(tc.server, "8081")
		if got, err := echo.UDP(tctx, dial, up, "hostname"); err != nil || got != "pod-a" {
			t.Errorf("udp hostname via %s = %q, %v", up, got, err)
		}
		if got, err := echo.UDP(tctx, dial, up, "clientip"); err != nil || hostOf(got) != tc.client {
			t.Errorf("udp clientip via %s = %q, %v; want %s:*", up, got, err, tc.client)
		}
	}
}

// hostOf returns the IP part of IP:PORT ("" if it is not one).
func hostOf(hp string) string {
	h, _, err := net.SplitHostPort(hp)
	if err != nil {
		return ""
	}
	return h
}

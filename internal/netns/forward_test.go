package netns_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func TestForwardReachesHostLoopback(t *testing.T) {
	ns := netnstest.New(t, "fwd")
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := netns.Forward(ctx, ns, "127.0.0.1:0", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// From inside the namespace, the forwarded port echoes.
	out, err := ns.Command("bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(addr, ":", "/", 1)+"; echo hello >&3; head -1 <&3").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("relay from namespace: %v: %q", err, out)
	}
	// The host does not see the namespace's listener.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s is reachable from the host namespace", addr)
	}
}

package netns_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// A server on a namespace's loopback is reached from the host's namespace through
// Dialer, and is not reachable by a plain dial (the host's loopback is another one).
func TestDialerReachesNamespaceLoopback(t *testing.T) {
	ns := netnstest.New(t, "dial")
	l, err := netns.Listen(ns, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("inside"))
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := netns.Dialer(ns)(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(b) != "inside" {
		t.Fatalf("read %q, %v; want %q", b, err, "inside")
	}
	if c, err := (&net.Dialer{Timeout: 2 * time.Second}).Dial("tcp", l.Addr().String()); err == nil {
		// Something on the host's loopback may hold the same port by chance, but it
		// must not be our server.
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) == "inside" {
			t.Fatal("the namespace's server answered a dial from the host's namespace")
		}
	}
}

// PidsIn finds a process started in a namespace and not one outside it.
func TestPidsIn(t *testing.T) {
	ns := netnstest.New(t, "pids")
	cmd := ns.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// A process in the host's namespace. (Not this test process: its main thread
	// may have been retired inside a test namespace, which /proc/PID/ns/net shows.)
	outside := exec.Command("sleep", "30")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = outside.Process.Kill(); _ = outside.Wait() })
	found := false
	for i := 0; i < 50 && !found; i++ { // `ip netns exec` execs sleep; allow it to get there
		pids, err := netns.PidsIn(ns.Path())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pids {
			if p == outside.Process.Pid {
				t.Fatal("a process in the host's namespace was listed")
			}
			if p == os.Getpid() {
				t.Fatal("the calling process was listed")
			}
			found = found || p == cmd.Process.Pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !found {
		t.Fatalf("pid %d not found in %s", cmd.Process.Pid, ns.Path())
	}
	names, err := netns.Names()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, ns.Name()) {
		t.Fatalf("Names() = %v, want it to hold %s", names, ns.Name())
	}
}

// A name is refused before anything is sent: Go's resolver would look it up
// in the caller's namespace. The caller's own namespace stands for any (the
// check needs no root and enters nothing).
func TestDialerRefusesNames(t *testing.T) {
	self, err := netns.OpenPath("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	dial := netns.Dialer(self)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, addr := range []string{"localhost:80", "web-0.nginx-hl:80", "kubernetes.default.svc.cluster.local.:443"} {
		c, err := dial(ctx, "tcp", addr)
		if c != nil {
			c.Close()
		}
		if !errors.Is(err, netns.ErrName) {
			t.Errorf("dial %s: %v, want ErrName", addr, err)
		}
	}
	// An address passes (loopback port 1: refused, or answered by chance).
	if c, err := dial(ctx, "tcp", "127.0.0.1:1"); errors.Is(err, netns.ErrName) {
		t.Errorf("dial 127.0.0.1:1: %v", err)
	} else if c != nil {
		c.Close()
	}
}

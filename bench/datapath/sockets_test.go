package datapathbench

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// listenIn starts a line echo server on 127.0.0.1 inside ns (lo up) and
// returns its address.
func listenIn(t *testing.T, ns *netns.NS) netip.AddrPort {
	t.Helper()
	if out, err := exec.Command("ip", "-n", ns.Name(), "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v %s", err, out)
	}
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp4", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte(line))
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// The factory's sockets live in the namespace they were made in, whatever
// goroutine connects them: 127.0.0.1 of the test namespace answers (the
// host's loopback has no such listener), a closed port is refused at once,
// and stop closes the sockets nobody took.
func TestSocketFactory(t *testing.T) {
	ns := netnstest.New(t, "dp-sock")
	ap := listenIn(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := startSockets(ctx, ns, unix.AF_INET)
	for i := range 3 {
		c, err := f.dial(ctx, ap)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || got != "ping\n" {
			t.Fatalf("echo = %q, %v", got, err)
		}
		c.Close()
	}
	closed := netip.AddrPortFrom(ap.Addr(), ap.Port()+1)
	if c, err := f.dial(ctx, closed); err == nil || !strings.Contains(err.Error(), "refused") {
		if c != nil {
			c.Close()
		}
		t.Errorf("dial to closed port %s: err = %v, want connection refused", closed, err)
	}
	// Once the factory has refilled its backlog, stop must close at least
	// those sockets (other fds only close meanwhile: the server's ends).
	for deadline := time.Now().Add(5 * time.Second); len(f.fds) < socketBacklog; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("factory holds %d sockets after 5s, want %d", len(f.fds), socketBacklog)
		}
	}
	before := openFDs(t)
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); before-after < socketBacklog {
		t.Errorf("open fds %d before stop, %d after: the %d unused sockets were not closed", before, after, socketBacklog)
	}
	if _, err := f.dial(ctx, ap); err == nil {
		t.Errorf("dial after stop succeeded")
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// pinCPUs puts this process on the first half of the CPUs and the processes
// of the given namespaces on the second half; unpin gives both every CPU.
func TestPinCPUs(t *testing.T) {
	ns := netnstest.New(t, "dp-pin")
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// ip netns exec enters the namespace, then execs sleep: wait for that.
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := netns.PidsIn(ns.Path())
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == 1 && pids[0] == cmd.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes in %s: %v, want [%d]", ns.Path(), pids, cmd.Process.Pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	client, servers, ok := cpuSets()
	p, err := pinCPUs([]string{ns.Path()})
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		if !strings.Contains(p.desc, "nothing pinned") {
			t.Errorf("one CPU: desc %q", p.desc)
		}
		return
	}
	if got := affinity(t, cmd.Process.Pid); got != servers {
		t.Errorf("server affinity %v, want %v", cpuList(&got), cpuList(&servers))
	}
	if got := affinity(t, os.Getpid()); got != client {
		t.Errorf("own affinity %v, want %v", cpuList(&got), cpuList(&client))
	}
	if err := p.unpin(); err != nil {
		t.Fatal(err)
	}
	all := client
	for c := range 1024 {
		if servers.IsSet(c) {
			all.Set(c)
		}
	}
	if got := affinity(t, cmd.Process.Pid); got != all {
		t.Errorf("server affinity after unpin %v, want %v", cpuList(&got), cpuList(&all))
	}
	// A namespace without a process is an error, and leaves nothing pinned.
	empty := netnstest.New(t, "dp-pin-empty")
	if _, err := pinCPUs([]string{empty.Path()}); err == nil || !strings.Contains(err.Error(), "no process") {
		t.Errorf("empty namespace: err = %v", err)
	}
	if got := affinity(t, os.Getpid()); got != all {
		t.Errorf("own affinity after a failed pin %v, want %v", cpuList(&got), cpuList(&all))
	}
}

func affinity(t *testing.T, pid int) unix.CPUSet {
	t.Helper()
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

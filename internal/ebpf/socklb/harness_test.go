package socklb

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// harness is a throwaway namespace with a child cgroup that the load balancer
// is attached to; clients run in both, servers in the namespace.
type harness struct {
	ns   *netns.NS
	cg   string
	cgfd int
	lb   *LB
}

// newHarness makes the namespace and cgroup and attaches an LB, all removed
// when the test ends (the LB first).
func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{ns: netnstest.New(t, "socklb")}
	h.cg = cgrouptest.New(t)
	h.cgfd = cgrouptest.Open(t, h.cg)
	lb, err := Open(h.cg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	h.lb = lb
	return h
}

// client runs the test binary as a client (client_test.go) inside the
// cgroup and the namespace and returns its stdout. The process starts in the
// cgroup (CLONE_INTO_CGROUP), before `ip netns exec` remounts /sys.
func (h *harness) client(t testing.TB, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.ns.Name(), os.Args[0]}, args...)...)
	// Without asynchronous preemption no signal interrupts the client's
	// blocking connect (which SO_SNDTIMEO makes fail with EINTR, not restart).
	cmd.Env = append(os.Environ(), envClient+"=1", "GODEBUG=asyncpreemptoff=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: h.cgfd}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client %q: %v: %s", args, err, stderr.String())
	}
	return out
}

// dial runs n connects of network to addr in a client and returns them.
func (h *harness) dial(t testing.TB, network, addr string, n int) []attempt {
	t.Helper()
	out := h.client(t, "dial", network, addr, strconv.Itoa(n))
	var as []attempt
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var a attempt
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("client output %q: %v", sc.Text(), err)
		}
		as = append(as, a)
	}
	if len(as) != n {
		t.Fatalf("client: %d attempts, want %d: %s", len(as), n, out)
	}
	return as
}

// addLoopback adds the IPv6 address cidr to lo in the namespace, without
// duplicate address detection, so it is usable at once.
func (h *harness) addLoopback(t testing.TB, cidr string) {
	t.Helper()
	if out, err := h.ns.Command("ip", "-6", "addr", "add", cidr, "dev", "lo", "nodad").CombinedOutput(); err != nil {
		t.Fatalf("add %s to lo: %v: %s", cidr, err, out)
	}
}

// serveTCP listens on addr inside the namespace; each connection gets name
// and a newline, then an echo of what it sends. It stops when the test ends.
func (h *harness) serveTCP(t testing.TB, addr, name string) {
	t.Helper()
	var ln net.Listener
	if err := h.ns.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(ioTimeout))
				if _, err := io.WriteString(c, name+"\n"); err == nil {
					_, _ = io.Copy(c, c)
				}
			}()
		}
	}()
}

// serveUDP listens on addr inside the namespace and answers each datagram
// with name, a newline and the datagram. It stops when the test ends.
func (h *harness) serveUDP(t testing.TB, addr, name string) {
	t.Helper()
	var pc net.PacketConn
	if err := h.ns.Do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			} else if err != nil {
				continue
			}
			_, _ = pc.WriteTo(append([]byte(name+"\n"), buf[:n]...), from)
		}
	}()
}

// dialOutside connects once from the test process, which is in the namespace
// but not in the cgroup, and returns connect's error (nil on success) and the
// peer Go reports.
func (h *harness) dialOutside(t testing.TB, addr string) (string, error) {
	t.Helper()
	var peer string
	err := h.ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			return err
		}
		defer c.Close()
		peer = c.RemoteAddr().String()
		return nil
	})
	return peer, err
}

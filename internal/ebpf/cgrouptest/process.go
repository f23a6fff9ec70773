package cgrouptest

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

	"github.com/svcnet/svcnet/internal/netns"
)

// Client runs the test binary as a client (client.go) inside the cgroup of
// descriptor cgfd (Open) and the namespace ns, and returns its stdout. The
// process starts in the cgroup (CLONE_INTO_CGROUP), before `ip netns exec`
// remounts /sys.
func Client(t testing.TB, ns *netns.NS, cgfd int, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name(), os.Args[0]}, args...)...)
	// Without asynchronous preemption no signal interrupts the client's
	// blocking connect (which SO_SNDTIMEO makes fail with EINTR, not restart).
	cmd.Env = append(os.Environ(), EnvClient+"=1", "GODEBUG=asyncpreemptoff=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgfd}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client %q: %v: %s", args, err, stderr.String())
	}
	return out
}

// Dial runs n connects of network ("tcp" or "udp") to addr in a client
// (Client) and returns them.
func Dial(t testing.TB, ns *netns.NS, cgfd int, network, addr string, n int) []Attempt {
	t.Helper()
	return attempts(t, Client(t, ns, cgfd, "dial", network, addr, strconv.Itoa(n)), n)
}

// attempts parses a client's n attempt lines.
func attempts(t testing.TB, out []byte, n int) []Attempt {
	t.Helper()
	var as []Attempt
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var a Attempt
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

// SendTo sends n datagrams to addr, each from a fresh unconnected UDP
// socket, in a client (Client) and returns them.
func SendTo(t testing.TB, ns *netns.NS, cgfd int, addr string, n int) []Attempt {
	t.Helper()
	return attempts(t, Client(t, ns, cgfd, "sendto", addr, strconv.Itoa(n)), n)
}

// Holder is a client process keeping its connections open (Hold).
type Holder struct {
	// Attempts are its connects, in order.
	Attempts []Attempt
	cmd      *exec.Cmd
	stdin    io.WriteCloser
}

// Hold makes n TCP connections to addr, one after the other, from a client
// in the cgroup and namespace, and returns once all are made, with them
// open; Release (or the test's end) closes them.
func Hold(t testing.TB, ns *netns.NS, cgfd int, addr string, n int) *Holder {
	t.Helper()
	return HoldRetry(t, ns, cgfd, addr, n, 1)
}

// HoldRetry is Hold, each socket connecting again while it is refused, up
// to tries connects.
func HoldRetry(t testing.TB, ns *netns.NS, cgfd int, addr string, n, tries int) *Holder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns.Name(), os.Args[0], "hold", addr, strconv.Itoa(n), strconv.Itoa(tries))
	cmd.Env = append(os.Environ(), EnvClient+"=1", "GODEBUG=asyncpreemptoff=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgfd}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &Holder{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		if err := h.Release(); err != nil {
			t.Errorf("holder: %v: %s", err, stderr.String())
		}
		cancel()
	})
	sc := bufio.NewScanner(stdout)
	for len(h.Attempts) < n && sc.Scan() {
		var a Attempt
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("holder output %q: %v", sc.Text(), err)
		}
		h.Attempts = append(h.Attempts, a)
	}
	if len(h.Attempts) != n {
		t.Fatalf("holder: %d connections, want %d: %v: %s", len(h.Attempts), n, sc.Err(), stderr.String())
	}
	return h
}

// Release closes the holder's connections and waits for it to exit.
// Releasing again does nothing.
func (h *Holder) Release() error {
	if h.stdin == nil {
		return nil
	}
	h.stdin.Close()
	h.stdin = nil
	return h.cmd.Wait()
}

// ServeTCP listens on addr inside ns; each connection gets name and a
// newline, then an echo of what it sends. It stops when the test ends.
func ServeTCP(t testing.TB, ns *netns.NS, addr, name string) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
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
				_ = c.SetDeadline(time.Now().Add(IOTimeout))
				if _, err := io.WriteString(c, name+"\n"); err == nil {
					_, _ = io.Copy(c, c)
				}
			}()
		}
	}()
}

// ServeUDP listens on addr inside ns and answers each datagram with name, a
// newline and the datagram. It stops when the test ends.
func ServeUDP(t testing.TB, ns *netns.NS, addr, name string) {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
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

// DialOutside connects once from the test process, which is in ns but not in
// the cgroup, and returns connect's error (nil on success) and the peer Go
// reports.
func DialOutside(t testing.TB, ns *netns.NS, addr string) (string, error) {
	t.Helper()
	var peer string
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, IOTimeout)
		if err != nil {
			return err
		}
		defer c.Close()
		peer = c.RemoteAddr().String()
		return nil
	})
	return peer, err
}

package lab

import (
	"bytes"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestSocketKind(t *testing.T) {
	for network, want := range map[string][2]int{
		"tcp4": {unix.AF_INET, unix.SOCK_STREAM}, "tcp6": {unix.AF_INET6, unix.SOCK_STREAM},
		"udp4": {unix.AF_INET, unix.SOCK_DGRAM}, "udp6": {unix.AF_INET6, unix.SOCK_DGRAM},
	} {
		d, ty, err := socketKind(network)
		if err != nil || d != want[0] || ty != want[1] {
			t.Errorf("socketKind(%s) = %d, %d, %v; want %v", network, d, ty, err, want)
		}
	}
	for _, bad := range []string{"tcp", "unix", "ip4:icmp", ""} {
		if _, _, err := socketKind(bad); err == nil {
			t.Errorf("socketKind(%q): want an error", bad)
		}
	}
}

// inProcessSource is a socket source served by ServeSockets in this process:
// the protocol and the swap of sockets without a node (its sockets are made
// in the test's own namespace and cgroup).
func inProcessSource(t *testing.T) *socketSource {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	local, remote := os.NewFile(uintptr(fds[0]), "local"), os.NewFile(uintptr(fds[1]), "remote")
	fc, err := net.FileConn(local)
	local.Close()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- ServeSockets(remote); remote.Close() }()
	s := &socketSource{where: "test", conn: fc.(*net.UnixConn), errb: &bytes.Buffer{}, done: make(chan struct{})}
	t.Cleanup(func() {
		fc.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("ServeSockets: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("ServeSockets still runs 5s after its peer closed")
		}
	})
	return s
}

// A dial through the source's Control connects on the source's socket and
// carries data both ways, for TCP and UDP, over IPv4 and IPv6 loopback.
func TestSocketSourceDial(t *testing.T) {
	s := inProcessSource(t)
	d := net.Dialer{Control: s.control, Timeout: 5 * time.Second}
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
		c, err := d.Dial(network, ln.Addr().String())
		if err != nil {
			ln.Close()
			t.Fatalf("%s: %v", network, err)
		}
		if c.RemoteAddr().String() != ln.Addr().String() {
			t.Errorf("%s: remote %v, want %v", network, c.RemoteAddr(), ln.Addr())
		}
		echoOnce(t, network, c)
		c.Close()
		ln.Close()
	}
	for _, network := range []string{"udp4", "udp6"} {
		addr := map[string]string{"udp4": "127.0.0.1:0", "udp6": "[::1]:0"}[network]
		pc, err := net.ListenPacket(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			b := make([]byte, 64)
			n, from, err := pc.ReadFrom(b)
			if err == nil {
				_, _ = pc.WriteTo(b[:n], from)
			}
		}()
		c, err := d.Dial(network, pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			t.Fatalf("%s: %v", network, err)
		}
		echoOnce(t, network, c)
		c.Close()
		pc.Close()
	}
}

func echoOnce(t *testing.T, network string, c net.Conn) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("%s: write: %v", network, err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("%s: read %q, %v", network, b, err)
	}
}

// A source asked for what it does not make answers with EINVAL and keeps
// serving.
func TestSocketSourceRefuses(t *testing.T) {
	s := inProcessSource(t)
	if fd, err := s.socket(unix.AF_UNIX, unix.SOCK_STREAM); err == nil {
		unix.Close(fd)
		t.Error("socket(AF_UNIX): want an error")
	}
	fd, err := s.socket(unix.AF_INET, unix.SOCK_STREAM)
	if err != nil {
		t.Fatalf("socket(AF_INET) after a refusal: %v", err)
	}
	unix.Close(fd)
}

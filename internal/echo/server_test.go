package echo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// start runs Serve on loopback and returns its TCP and UDP addresses; the
// server is stopped (and must return nil) when the test ends.
func start(t *testing.T, cfg Config) (tcp, udp []string) {
	t.Helper()
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	ready := make(chan struct{})
	cfg.Ready = func(ta, ua []net.Addr) {
		for _, a := range ta {
			tcp = append(tcp, a.String())
		}
		for _, a := range ua {
			udp = append(udp, a.String())
		}
		close(ready)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, klog.Background()) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after cancel")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server not ready")
	}
	return tcp, udp
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recordingDial dials normally and remembers the local address of the last
// connection (the address the server must report as the client).
type recordingDial struct {
	mu    sync.Mutex
	local string
}

func (r *recordingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		r.mu.Lock()
		r.local = c.LocalAddr().String()
		r.mu.Unlock()
	}
	return c, err
}

func (r *recordingDial) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.local
}

func TestHTTPPaths(t *testing.T) {
	tcp, _ := start(t, Config{Name: "pod-a", Node: "node1", PodIP: netip.MustParseAddr("192.0.2.7"), TCP: []int{0, 0}})
	ctx := testCtx(t)
	var rd recordingDial
	for _, addr := range tcp {
		got, err := Get(ctx, rd.dial, "http://"+addr+"/")
		if err != nil {
			t.Fatal(err)
		}
		want := Reply{Pod: "pod-a", Node: "node1", PodIP: "192.0.2.7", Client: rd.last(), Server: addr}
		if got != want {
			t.Errorf("GET / on %s = %+v, want %+v", addr, got, want)
		}
	}
	base := "http://" + tcp[0]
	raw, err := GetText(ctx, nil, base+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(raw, `{"pod":"pod-a","node":"node1","podIP":"192.0.2.7","client":"127.0.0.1:`) || strings.Count(raw, "\n") != 1 || !strings.HasSuffix(raw, "\n") {
		t.Errorf("GET / body is not one JSON line in field order: %q", raw)
	}
	for path, want := range map[string]string{"/hostname": "pod-a", "/readyz": "ok", "/healthz": "ok"} {
		if got, err := GetText(ctx, nil, base+path); err != nil || got != want {
			t.Errorf("GET %s = %q, %v; want %q", path, got, err, want)
		}
	}
	if got, err := GetText(ctx, rd.dial, base+"/clientip"); err != nil || got != rd.last() {
		t.Errorf("GET /clientip = %q, %v; want %q", got, err, rd.last())
	}
	if _, err := GetText(ctx, nil, base+"/nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GET /nope: %v, want a 404 error", err)
	}
}

func TestTCPLineCommands(t *testing.T) {
	tcp, _ := start(t, Config{Name: "pod-a", TCP: []int{0}})
	ctx := testCtx(t)
	var rd recordingDial
	for _, tc := range []struct{ line, want string }{
		{"hostname", "pod-a"},
		{"echo hello there", "hello there"},
		{"something else", "something else"},
	} {
		if got, err := TCPLine(ctx, nil, tcp[0], tc.line); err != nil || got != tc.want {
			t.Errorf("TCPLine(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	if got, err := TCPLine(ctx, rd.dial, tcp[0], "clientip"); err != nil || got != rd.last() {
		t.Errorf("TCPLine(clientip) = %q, %v; want %q", got, err, rd.last())
	}
}

// Arbitrary bytes without newlines come back unchanged and without waiting
// for a newline; a command without newline is answered at EOF or after
// HoldTimeout; an incomplete method prefix turns into the line protocol after
// SniffTimeout.
func TestTCPRawEcho(t *testing.T) {
	tcp, _ := start(t, Config{Name: "pod-a", TCP: []int{0}})
	dial := func(t *testing.T) *net.TCPConn {
		c, err := net.DialTimeout("tcp", tcp[0], 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c.(*net.TCPConn)
	}
	t.Run("binary", func(t *testing.T) {
		c := dial(t)
		payload := make([]byte, 100<<10)
		for i := range payload {
			payload[i] = byte(i*7%250) + 1
			if payload[i] == '\n' {
				payload[i] = 0
			}
		}
		go func() { _, _ = c.Write(payload) }()
		got := make([]byte, len(payload))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatal("binary payload changed on the way back")
		}
	})
	t.Run("command at half-close", func(t *testing.T) {
		c := dial(t)
		_, _ = c.Write([]byte("hostname"))
		_ = c.CloseWrite()
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "pod-a\n" {
			t.Fatalf("got %q, %v; want %q", got, err, "pod-a\n")
		}
	})
	t.Run("command after hold timeout", func(t *testing.T) {
		c := dial(t)
		began := time.Now()
		_, _ = c.Write([]byte("hostname"))
		got := make([]byte, len("pod-a\n"))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "pod-a\n" {
			t.Fatalf("got %q, %v", got, err)
		}
		if d := time.Since(began); d < HoldTimeout/2 {
			t.Errorf("answered after %v, before the hold timeout %v", d, HoldTimeout)
		}
	})
	t.Run("method prefix then silence", func(t *testing.T) {
		c := dial(t)
		_, _ = c.Write([]byte("GE"))
		got := make([]byte, 2)
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "GE" {
			t.Fatalf("got %q, %v", got, err)
		}
		if got, err := writeRead(c, "echo x\n", 2); err != nil || got != "x\n" {
			t.Fatalf("then echo command: %q, %v", got, err)
		}
	})
}

func writeRead(c net.Conn, s string, n int) (string, error) {
	if _, err := c.Write([]byte(s)); err != nil {
		return "", err
	}
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	return string(b), err
}

func TestUDP(t *testing.T) {
	_, udp := start(t, Config{Name: "pod-a", UDP: []int{0}})
	ctx := testCtx(t)
	for _, tc := range []struct{ msg, want string }{
		{"hostname", "pod-a"},
		{"hostname\n", "pod-a"},
		{"echo abc", "abc"},
		{"\x00\x01 raw\n", "\x00\x01 raw\n"},
	} {
		if got, err := UDP(ctx, nil, udp[0], tc.msg); err != nil || got != tc.want {
			t.Errorf("UDP(%q) = %q, %v; want %q", tc.msg, got, err, tc.want)
		}
	}
	var rd recordingDial
	if got, err := UDP(ctx, rd.dial, udp[0], "clientip"); err != nil || got != rd.last() {
		t.Errorf("UDP(clientip) = %q, %v; want %q", got, err, rd.last())
	}
}

// TestWhoami: whoami answers GET /'s Reply on one line, over UDP (the
// server named by the pod's address and the port) and over TCP lines (the
// address the connection arrived on).
func TestWhoami(t *testing.T) {
	tcp, udp := start(t, Config{Name: "pod-a", Node: "node1", PodIP: netip.MustParseAddr("127.0.0.1"), TCP: []int{0}, UDP: []int{0}})
	ctx := testCtx(t)
	for _, c := range []struct {
		proto, addr string
		ask         func(context.Context, DialFunc, string, string) (string, error)
	}{{"udp", udp[0], UDP}, {"tcp", tcp[0], TCPLine}} {
		var rd recordingDial
		got, err := c.ask(ctx, rd.dial, c.addr, "whoami")
		if err != nil {
			t.Fatalf("%s whoami: %v", c.proto, err)
		}
		var r Reply
		if err := json.Unmarshal([]byte(got), &r); err != nil {
			t.Fatalf("%s whoami: %q: %v", c.proto, got, err)
		}
		want := Reply{Pod: "pod-a", Node: "node1", PodIP: "127.0.0.1", Client: rd.last(), Server: c.addr}
		if r != want {
			t.Errorf("%s whoami = %+v; want %+v", c.proto, r, want)
		}
	}
}

// Cancelling ctx stops Serve even with idle line and HTTP keep-alive
// connections open, and the ports close.
func TestShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan []net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{Name: "p", Host: "127.0.0.1", TCP: []int{0}, UDP: []int{0},
			Ready: func(tcp, _ []net.Addr) { addrs <- tcp }}, klog.Background())
	}()
	var addr string
	select {
	case a := <-addrs:
		addr = a[0].String()
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	keep, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	_ = keep.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := keep.Write([]byte("GET /hostname HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := keep.Read(make([]byte, 512)); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("idle connection after shutdown: %v, want EOF", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts after shutdown", addr)
	}
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "reset") }

func TestServeErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	ctx := testCtx(t)
	if err := Serve(ctx, Config{Name: "p", Host: "127.0.0.1", TCP: []int{0, port}}, klog.Background()); err == nil || !strings.Contains(err.Error(), "listen tcp port") {
		t.Errorf("Serve on a taken port: %v, want a listen error", err)
	}
	if err := Serve(ctx, Config{Name: "p"}, klog.Background()); err == nil {
		t.Error("Serve without ports succeeded")
	}
	if err := Serve(ctx, Config{Name: "p", UDP: []int{70000}}, klog.Background()); err == nil {
		t.Error("Serve with port 70000 succeeded")
	}
}

package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/svcnet/svcnet/internal/echo"
)

// TestPrintHits: a line per request, its verb by the target's scheme, a
// failure said in a network engineer's words, and the tally.
func TestPrintHits(t *testing.T) {
	ok := Hit{Reply: echo.Reply{Pod: "web-1", PodIP: "192.168.1.10", Node: "node1", Client: "192.168.2.5:41000"}, Addr: "10.96.0.20:53"}
	for _, c := range []struct {
		target string
		hits   []Hit
		want   []string
		failed int
	}{{
		target: "udp://10.96.0.20:53",
		hits:   []Hit{ok, {Err: fmt.Errorf("echo udp: receive: %w", syscall.ECONNREFUSED), Addr: "10.96.0.20:53"}},
		want: []string{
			"UDP udp://10.96.0.20:53: answered by pod web-1 (192.168.1.10 on node1); it saw the client as 192.168.2.5:41000\n",
			"UDP udp://10.96.0.20:53: connection refused (a TCP reset to the SYN, or an ICMP port unreachable)\n",
			"2 requests: 1 answered, 1 failed\n  answered by: web-1 on node1 ×1\n  client seen: 192.168.2.5 ×1\n",
		},
		failed: 1,
	}, {
		target: "http://10.96.0.20:80/",
		hits:   []Hit{{Err: context.DeadlineExceeded, Addr: "10.96.0.20:80"}},
		want:   []string{"GET http://10.96.0.20:80/: no answer (timed out)\n"},
		failed: 1,
	}} {
		var b strings.Builder
		if got := PrintHits(&b, c.target, c.hits); got != c.failed {
			t.Errorf("%s: %d failed, want %d", c.target, got, c.failed)
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", c.target, w, b.String())
			}
		}
	}
}

// TestDescribe: each failure a request can meet, by its errno or error.
func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), "connection refused (a TCP reset to the SYN, or an ICMP port unreachable)"},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), "connection reset"},
		{context.DeadlineExceeded, "no answer (timed out)"},
		{fmt.Errorf("dial: %w", syscall.EHOSTUNREACH), "unreachable (an ICMP host or network unreachable, or no route)"},
		{fmt.Errorf("get: %w", io.EOF), "closed without an answer"},
		{errors.New("something else"), "something else"},
	} {
		if got := failureText(c.err); got != c.want {
			t.Errorf("failureText(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestTraceHint: the lab trace of the first failed request that was sent,
// to the address it went to, over UDP for a udp:// target; none when every
// request was answered or none was sent.
func TestTraceHint(t *testing.T) {
	fail := func(addr string) Hit { return Hit{Err: syscall.ECONNREFUSED, Addr: addr} }
	answered := Hit{Reply: echo.Reply{Pod: "web-1"}, Addr: "10.96.0.20:80"}
	for _, c := range []struct {
		lab, from, target string
		hits              []Hit
		want              string
	}{
		{"", "client-1", "http://web:80/", []Hit{answered, fail("10.96.0.21:80"), fail("10.96.0.22:80")}, "svcnet lab trace client-1 10.96.0.21:80 --verify"},
		{"mylab", "node1", "udp://10.96.0.20:53", []Hit{fail("10.96.0.20:53")}, "svcnet lab trace --name mylab node1 10.96.0.20:53 --proto udp --verify"},
		{"", "client-1", "http://web:80/", []Hit{answered}, ""},
		{"", "client-1", "http://web:80/", []Hit{{Err: syscall.ECONNREFUSED}}, ""},
	} {
		if got := TraceHint(c.lab, c.from, c.target, c.hits); got != c.want {
			t.Errorf("TraceHint(%q, %q, %q) = %q, want %q", c.lab, c.from, c.target, got, c.want)
		}
	}
}

package echo

import (
	"strings"
	"testing"
)

func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Verdict
	}{
		{"", NeedMore},
		{"G", NeedMore},
		{"GET", NeedMore},
		{"GET ", IsHTTP},
		{"GET / HTTP/1.1\r\n", IsHTTP},
		{"OPTIONS", NeedMore},
		{"OPTIONS * HTTP/1.1", IsHTTP},
		{"PATCH /x", IsHTTP},
		{"P", NeedMore},
		{"PU", NeedMore},
		{"PUX", IsLines},
		{"GETX", IsLines},
		{"get / HTTP/1.1", IsLines},
		{"hostname\n", IsLines},
		{"\x00\x01\x02", IsLines},
		{"CONNECT host:443", IsLines},
	} {
		if got := Sniff([]byte(tc.in)); got != tc.want {
			t.Errorf("Sniff(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestCommandAndDatagram(t *testing.T) {
	p := Peer{Name: "pod-a", Client: "10.0.0.1:4242"}
	for _, tc := range []struct{ in, want string }{
		{"hostname", "pod-a"},
		{"hostname\n", "pod-a"},
		{"hostname\r\n", "pod-a"},
		{"clientip", "10.0.0.1:4242"},
		{"whoami", `{"pod":"pod-a","node":"","podIP":"","client":"10.0.0.1:4242","server":""}`},
		{"echo hello world", "hello world"},
		{"echo hello\n", "hello"},
		{"echo ", ""},
		{"echo", "echo"},
		{"HOSTNAME", "HOSTNAME"},
		{"hostname x", "hostname x"},
		{"anything\n", "anything\n"},
		{"\x00\xff", "\x00\xff"},
	} {
		if got := string(Datagram([]byte(tc.in), p)); got != tc.want {
			t.Errorf("Datagram(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Lines: commands answered with a newline, other lines verbatim, unterminated
// bytes held only while they may still become a command.
func TestLines(t *testing.T) {
	p := Peer{Name: "pod-a", Client: "[fd00::1]:80"}
	for _, tc := range []struct {
		name      string
		in        string
		final     bool
		out, held string
	}{
		{name: "command", in: "hostname\n", out: "pod-a\n"},
		{name: "crlf command", in: "clientip\r\n", out: "[fd00::1]:80\n"},
		{name: "whoami", in: "whoami\n", out: `{"pod":"pod-a","node":"","podIP":"","client":"[fd00::1]:80","server":""}` + "\n"},
		{name: "whoami prefix held", in: "who", held: "who"},
		{name: "echo command", in: "echo a b\n", out: "a b\n"},
		{name: "other line verbatim", in: "hello\r\n", out: "hello\r\n"},
		{name: "several lines", in: "hostname\nfoo\necho bar\n", out: "pod-a\nfoo\nbar\n"},
		{name: "command prefix held", in: "host", held: "host"},
		{name: "whole command held until newline", in: "hostname", held: "hostname"},
		{name: "command with cr held", in: "hostname\r", held: "hostname\r"},
		{name: "echo argument held", in: "echo some", held: "echo some"},
		{name: "binary echoed at once", in: "\x00\x01binary", out: "\x00\x01binary"},
		{name: "text echoed at once", in: "hello", out: "hello"},
		{name: "line then prefix", in: "x\nhost", out: "x\n", held: "host"},
		{name: "final command", in: "hostname", final: true, out: "pod-a\n"},
		{name: "final prefix verbatim", in: "host", final: true, out: "host"},
		{name: "final echo", in: "echo z", final: true, out: "z\n"},
		{name: "final empty", in: "", final: true, out: ""},
		{name: "long echo not held", in: "echo " + strings.Repeat("x", MaxHold), out: "echo " + strings.Repeat("x", MaxHold)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, held := Lines([]byte(tc.in), p, tc.final)
			if string(out) != tc.out || string(held) != tc.held {
				t.Errorf("Lines(%q, final=%v) = out %q held %q; want out %q held %q", tc.in, tc.final, out, held, tc.out, tc.held)
			}
		})
	}
}

// Held bytes plus the next chunk complete a command split across reads.
func TestLinesSplitCommand(t *testing.T) {
	p := Peer{Name: "pod-a"}
	out, held := Lines([]byte("hos"), p, false)
	if len(out) != 0 || string(held) != "hos" {
		t.Fatalf("first chunk: out %q held %q", out, held)
	}
	out, held = Lines(append(held, "tname\n"...), p, false)
	if string(out) != "pod-a\n" || len(held) != 0 {
		t.Fatalf("second chunk: out %q held %q", out, held)
	}
}

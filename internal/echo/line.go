package echo

import (
	"bytes"
	"encoding/json"
	"time"
)

// Protocol limits (see the package doc for the rules they bound).
const (
	// SniffTimeout bounds the wait for the rest of a possible HTTP method once
	// the first bytes are a proper prefix of one.
	SniffTimeout = time.Second
	// HoldTimeout is how long bytes that could still become a command line are
	// held without new data before they are taken as a complete line.
	HoldTimeout = 500 * time.Millisecond
	// MaxHold is the most bytes held waiting for a newline.
	MaxHold = 64 << 10
)

// httpMethods are the request methods that select HTTP, each with its space.
var httpMethods = [][]byte{
	[]byte("GET "), []byte("POST "), []byte("HEAD "), []byte("PUT "),
	[]byte("DELETE "), []byte("OPTIONS "), []byte("PATCH "),
}

// Verdict is Sniff's decision on a connection's first bytes.
type Verdict int

const (
	// NeedMore: the bytes are a proper prefix of an HTTP method token.
	NeedMore Verdict = iota
	// IsHTTP: the bytes begin with an HTTP method and a space.
	IsHTTP
	// IsLines: anything else; the connection speaks the line protocol.
	IsLines
)

// Sniff classifies a connection's first bytes b (empty b needs more).
func Sniff(b []byte) Verdict {
	more := false
	for _, m := range httpMethods {
		if bytes.HasPrefix(b, m) {
			return IsHTTP
		}
		if bytes.HasPrefix(m, b) {
			more = true
		}
	}
	if more {
		return NeedMore
	}
	return IsLines
}

// Peer is what a command may answer about a connection.
type Peer struct {
	Name   string // the pod's name
	Client string // the client's IP:PORT as the server saw it
	// Node, PodIP and Server (the pod's IP:PORT the connection or datagram
	// arrived on) complete whoami's answer, the Reply of GET /.
	Node, PodIP, Server string
}

// Command answers one line-protocol command. line has no terminator. ok is
// false when line is not a command.
func Command(line []byte, p Peer) (answer []byte, ok bool) {
	switch {
	case string(line) == "hostname":
		return []byte(p.Name), true
	case string(line) == "clientip":
		return []byte(p.Client), true
	case string(line) == "whoami":
		b, _ := json.Marshal(Reply{Pod: p.Name, Node: p.Node, PodIP: p.PodIP, Client: p.Client, Server: p.Server})
		return b, true
	case bytes.HasPrefix(line, []byte("echo ")):
		return line[len("echo "):], true
	}
	return nil, false
}

// Datagram returns the reply to one UDP datagram: a command's bare answer, or
// the datagram itself.
func Datagram(msg []byte, p Peer) []byte {
	text := bytes.TrimSuffix(msg, []byte("\n"))
	text = bytes.TrimSuffix(text, []byte("\r"))
	if a, ok := Command(text, p); ok {
		return a
	}
	return msg
}

// Lines runs the TCP line protocol over data, the held bytes of the previous
// call followed by what has just arrived. It returns the bytes to write and
// the bytes to hold for the next call. final (EOF, or HoldTimeout without new
// data) turns an unterminated rest into a last line instead of holding it.
func Lines(data []byte, p Peer, final bool) (out, held []byte) {
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		out = answerLine(out, data[:i+1], p)
		data = data[i+1:]
	}
	switch {
	case len(data) == 0:
		return out, nil
	case final:
		return answerLine(out, data, p), nil
	case mayBecomeCommand(data):
		return out, bytes.Clone(data)
	default:
		return append(out, data...), nil
	}
}

// answerLine appends the reply to one line (with its "\n", if any) to out.
func answerLine(out, line []byte, p Peer) []byte {
	text := bytes.TrimSuffix(line, []byte("\n"))
	text = bytes.TrimSuffix(text, []byte("\r"))
	if a, ok := Command(text, p); ok {
		out = append(out, a...)
		return append(out, '\n')
	}
	return append(out, line...)
}

// mayBecomeCommand reports whether unterminated bytes could still turn into a
// command line, and so are worth holding.
func mayBecomeCommand(b []byte) bool {
	if len(b) >= MaxHold {
		return false
	}
	b = bytes.TrimSuffix(b, []byte("\r"))
	if bytes.HasPrefix(b, []byte("echo ")) {
		return true
	}
	for _, c := range []string{"hostname", "clientip", "whoami", "echo "} {
		if bytes.HasPrefix([]byte(c), b) {
			return true
		}
	}
	return false
}

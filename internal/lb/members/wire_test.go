package members

import (
	"errors"
	"strings"
	"testing"
)

func TestWireRoundTrip(t *testing.T) {
	for _, msg := range []message{
		{kind: kindHeartbeat, name: "node1", incarnation: 1_700_000_000_123_456_789, seq: 1, ready: true},
		{kind: kindHeartbeat, name: "node1", incarnation: 1_700_000_000_123_456_789, seq: 2},
		{kind: kindLeave, name: strings.Repeat("n", maxNameLen), incarnation: -5, seq: 1<<64 - 1},
	} {
		b := encode(nil, msg)
		if len(b) != headerLen+len(msg.name) {
			t.Errorf("encoded %d bytes, want %d", len(b), headerLen+len(msg.name))
		}
		got, err := decode(b)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", msg, err)
		}
		if got != msg {
			t.Errorf("round trip: got %+v, want %+v", got, msg)
		}
	}
}

func TestWireMalformed(t *testing.T) {
	good := encode(nil, message{kind: kindHeartbeat, name: "node2", incarnation: 7, seq: 9})
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string][]byte{
		"empty":       nil,
		"short":       good[:headerLen-1],
		"bad magic":   mutate(func(b []byte) []byte { b[0] = 'X'; return b }),
		"version 2":   mutate(func(b []byte) []byte { b[4] = 2; return b }),
		"kind 0":      mutate(func(b []byte) []byte { b[5] = 0; return b }),
		"kind 3":      mutate(func(b []byte) []byte { b[5] = 3; return b }),
		"no name":     mutate(func(b []byte) []byte { b[6] = 0; return b[:headerLen] }),
		"truncated":   good[:len(good)-1],
		"extra bytes": append(append([]byte(nil), good...), 'x'),
	}
	for name, b := range cases {
		if _, err := decode(b); !errors.Is(err, errMalformed) {
			t.Errorf("%s: decode = %v, want errMalformed", name, err)
		}
	}
}

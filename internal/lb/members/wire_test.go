package members

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestWireRoundTrip(t *testing.T) {
	for _, msg := range []message{
		{kind: kindHeartbeat, name: "node1", incarnation: 1_700_000_000_123_456_789, seq: 1, ready: true, stamp: 1_700_000_001_000_000_000},
		{kind: kindHeartbeat, name: "node1", incarnation: 1_700_000_000_123_456_789, seq: 2, stamp: -1},
		{kind: kindLeave, name: strings.Repeat("n", maxNameLen), incarnation: -5, seq: 1<<64 - 1, stamp: 1<<63 - 1},
	} {
		b := encode(nil, msg, testKeys)
		if want := headerLen + len(msg.name) + tagLen; len(b) != want {
			t.Errorf("encoded %d bytes, want %d", len(b), want)
		}
		if len(b) > maxPacket {
			t.Errorf("encoded %d bytes, more than maxPacket %d", len(b), maxPacket)
		}
		got, err := decode(b, testKeys)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", msg, err)
		}
		if got != msg {
			t.Errorf("round trip: got %+v, want %+v", got, msg)
		}

		// Unsigned (Insecure): version 1, no timestamp, no MAC.
		u := encode(nil, msg, nil)
		if len(u) != headerLenV1+len(msg.name) || u[4] != versionUnsigned {
			t.Errorf("unsigned: %d bytes version %d, want %d bytes version 1", len(u), u[4], headerLenV1+len(msg.name))
		}
		got, err = decode(u, nil)
		want := msg
		want.stamp = 0
		if err != nil || got != want {
			t.Errorf("unsigned round trip: got %+v %v, want %+v", got, err, want)
		}
	}
}

// TestWireLayout checks the signed datagram byte by byte against the layout
// wire.go documents, with the MAC computed here independently.
func TestWireLayout(t *testing.T) {
	key := []byte("layout-key-0123456789")
	keys := mustKeys(string(key))
	b := encode([]byte("prefix"), message{kind: kindLeave, name: "n2", incarnation: 0x0102030405060708, seq: 0x1112131415161718, ready: true, stamp: 0x2122232425262728}, keys)
	if string(b[:6]) != "prefix" {
		t.Fatalf("encode did not append: %q", b[:6])
	}
	b = b[6:]
	want := []byte("SVHB")
	want = append(want, 2, byte(kindLeave), 2, flagReady)
	want = binary.BigEndian.AppendUint64(want, 0x0102030405060708)
	want = binary.BigEndian.AppendUint64(want, 0x1112131415161718)
	want = binary.BigEndian.AppendUint64(want, 0x2122232425262728)
	want = append(want, "n2"...)
	mac := hmac.New(sha256.New, key)
	mac.Write(want)
	want = mac.Sum(want)
	if !bytes.Equal(b, want) {
		t.Errorf("datagram\n got %x\nwant %x", b, want)
	}
}

// TestWireRejected: every way a datagram fails to decode, with the error class
// (and so the metric reason) each gets.
func TestWireRejected(t *testing.T) {
	msg := message{kind: kindHeartbeat, name: "node2", incarnation: 7, seq: 9, stamp: 11}
	good := encode(nil, msg, testKeys)
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	resign := func(f func(b []byte)) []byte {
		b := bytes.Clone(good[:len(good)-tagLen])
		f(b)
		return testKeys.appendTag(b, b)
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, errMalformed},
		{"short", good[:headerLenV1-1], errMalformed},
		{"bad magic", resign(func(b []byte) { b[0] = 'X' }), errMalformed},
		{"version 3", resign(func(b []byte) { b[4] = 3 }), errMalformed},
		{"kind 0", resign(func(b []byte) { b[5] = 0 }), errMalformed},
		{"kind 3", resign(func(b []byte) { b[5] = 3 }), errMalformed},
		{"no name", resign(func(b []byte) { b[6] = 0 }), errMalformed},
		{"name longer than the datagram", resign(func(b []byte) { b[6] = 200 }), errMalformed},
		{"truncated MAC", good[:len(good)-1], errMalformed},
		{"no MAC", good[:len(good)-tagLen], errMalformed},
		{"extra bytes", append(bytes.Clone(good), 'x'), errMalformed},
		{"unsigned (version 1)", encode(nil, msg, nil), errUnsigned},
		{"signed with another key", encode(nil, msg, otherKeys), errBadSignature},
		{"flipped bit in the name", mutate(func(b []byte) []byte { b[headerLen] ^= 1; return b }), errBadSignature},
		{"flipped bit in the kind", mutate(func(b []byte) []byte { b[5] ^= 3; return b }), errBadSignature},
		{"flipped ready flag", mutate(func(b []byte) []byte { b[7] ^= flagReady; return b }), errBadSignature},
		{"flipped bit in the sequence", mutate(func(b []byte) []byte { b[23] ^= 1; return b }), errBadSignature},
		{"flipped bit in the timestamp", mutate(func(b []byte) []byte { b[31] ^= 0x80; return b }), errBadSignature},
		{"flipped bit in the MAC", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), errBadSignature},
		{"MAC of zeros", mutate(func(b []byte) []byte { clear(b[len(b)-tagLen:]); return b }), errBadSignature},
	}
	for _, tc := range cases {
		if _, err := decode(tc.b, testKeys); !errors.Is(err, tc.want) {
			t.Errorf("%s: decode = %v, want %v", tc.name, err, tc.want)
		}
	}
	// An insecure receiver takes no signed datagram: it could not check it.
	if _, err := decode(good, nil); !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), "has no key") {
		t.Errorf("signed datagram at an insecure receiver: decode = %v, want errMalformed naming the missing key", err)
	}
}

// BenchmarkSignVerify prices the MAC per datagram: encoding (one HMAC) and
// decoding (one HMAC) a heartbeat of a typical node name.
func BenchmarkSignVerify(b *testing.B) {
	msg := message{kind: kindHeartbeat, name: "node-17.example", incarnation: 1, stamp: 1}
	buf := make([]byte, 0, maxPacket)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		msg.seq = uint64(i)
		pkt := encode(buf[:0], msg, testKeys)
		if _, err := decode(pkt, testKeys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeUnsigned is BenchmarkSignVerify without keys, the baseline.
func BenchmarkEncodeUnsigned(b *testing.B) {
	msg := message{kind: kindHeartbeat, name: "node-17.example", incarnation: 1}
	buf := make([]byte, 0, maxPacket)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		msg.seq = uint64(i)
		pkt := encode(buf[:0], msg, nil)
		if _, err := decode(pkt, nil); err != nil {
			b.Fatal(err)
		}
	}
}

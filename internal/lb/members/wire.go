package members

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// The heartbeat datagram, big-endian. Version 2, signed (the default):
//
//	0..3   magic "SVHB"
//	4      version (2)
//	5      kind (kindHeartbeat or kindLeave)
//	6      length of the node name (1..maxNameLen)
//	7      flags: bit 0 set when the sender is ready to own IPs; others zero
//	8..15  incarnation (int64, unix ns of the sender's start)
//	16..23 sequence number (uint64, +1 per datagram of one incarnation)
//	24..31 timestamp (int64, unix ns of the sender's clock when it sent)
//	32..   node name
//	then   HMAC-SHA256 (32 bytes) of every byte before it, keyed with the
//	       sender's signing key
//
// Version 1, unsigned (Config.Insecure only), is bytes 0..23 with version 1
// and the node name at 24, with no timestamp and no MAC.
const (
	wireMagic       = "SVHB"
	versionUnsigned = 1
	versionSigned   = 2
	headerLenV1     = 24
	headerLen       = 32
	tagLen          = sha256.Size
	// maxNameLen is the longest node name a heartbeat carries; Kubernetes
	// object names are at most 253 bytes.
	maxNameLen = 253
	// maxPacket bounds a datagram: signed header, the longest name, the MAC.
	maxPacket = headerLen + maxNameLen + tagLen
)

// kind says what a datagram announces.
type kind byte

const (
	kindHeartbeat kind = 1
	// kindLeave: the sender's Run is stopping; it is dead from now on.
	kindLeave kind = 2
)

// flagReady marks a sender that is ready to own IPs (its speaker warmed up).
const flagReady = 1

// message is one decoded datagram.
type message struct {
	kind        kind
	name        string
	incarnation int64
	seq         uint64
	ready       bool
	// stamp is the sender's clock when it sent, unix ns (signed datagrams only).
	stamp int64
}

// Why a datagram was not decoded.
var (
	errMalformed    = errors.New("malformed heartbeat")
	errUnsigned     = errors.New("unsigned heartbeat")
	errBadSignature = errors.New("bad signature")
)

// encode appends the wire form of msg to b: signed with keys (version 2), or
// unsigned (version 1, no timestamp) when keys is nil. The name must be
// 1..maxNameLen bytes (New checks the node name).
func encode(b []byte, msg message, keys *Keyring) []byte {
	start := len(b)
	var flags byte
	if msg.ready {
		flags |= flagReady
	}
	version := byte(versionSigned)
	if keys == nil {
		version = versionUnsigned
	}
	b = append(b, wireMagic...)
	b = append(b, version, byte(msg.kind), byte(len(msg.name)), flags)
	b = binary.BigEndian.AppendUint64(b, uint64(msg.incarnation))
	b = binary.BigEndian.AppendUint64(b, msg.seq)
	if keys == nil {
		return append(b, msg.name...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(msg.stamp))
	b = append(b, msg.name...)
	return keys.appendTag(b, b[start:])
}

// decode parses and authenticates one datagram. With keys it accepts only a
// signed datagram whose MAC one of the keys made: an unsigned one fails with
// errUnsigned, a wrong MAC with errBadSignature. Without keys (Config.Insecure)
// it accepts only unsigned datagrams. Anything else that is not exactly one
// well-formed heartbeat fails with errMalformed. Unknown flags are ignored.
func decode(b []byte, keys *Keyring) (message, error) {
	if len(b) < headerLenV1 || string(b[0:4]) != wireMagic {
		return message{}, fmt.Errorf("%w: %d bytes, no header", errMalformed, len(b))
	}
	switch v := b[4]; {
	case v == versionUnsigned && keys != nil:
		return message{}, fmt.Errorf("%w (version %d)", errUnsigned, v)
	case v == versionSigned && keys == nil:
		return message{}, fmt.Errorf("%w: signed (version %d), and this speaker has no key", errMalformed, v)
	case v != versionUnsigned && v != versionSigned:
		return message{}, fmt.Errorf("%w: version %d", errMalformed, v)
	}
	k := kind(b[5])
	if k != kindHeartbeat && k != kindLeave {
		return message{}, fmt.Errorf("%w: kind %d", errMalformed, b[5])
	}
	n := int(b[6])
	hdr, tail := headerLenV1, 0
	if keys != nil {
		hdr, tail = headerLen, tagLen
	}
	if n == 0 || len(b) != hdr+n+tail {
		return message{}, fmt.Errorf("%w: name length %d in %d bytes", errMalformed, n, len(b))
	}
	if keys != nil && !keys.verify(b[:hdr+n], b[hdr+n:]) {
		return message{}, errBadSignature
	}
	msg := message{
		kind:        k,
		incarnation: int64(binary.BigEndian.Uint64(b[8:16])),
		seq:         binary.BigEndian.Uint64(b[16:24]),
		name:        string(b[hdr : hdr+n]),
		ready:       b[7]&flagReady != 0,
	}
	if keys != nil {
		msg.stamp = int64(binary.BigEndian.Uint64(b[24:32]))
	}
	return msg, nil
}

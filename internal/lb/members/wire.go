package members

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The heartbeat datagram, big-endian:
//
//	0..3   magic "SVHB"
//	4      version (1)
//	5      kind (kindHeartbeat or kindLeave)
//	6      length of the node name (1..maxNameLen)
//	7      flags: bit 0 set when the sender is ready to own IPs; others zero
//	8..15  incarnation (int64, unix ns of the sender's start)
//	16..23 sequence number (uint64, +1 per datagram of one incarnation)
//	24..   node name
const (
	wireMagic   = "SVHB"
	wireVersion = 1
	headerLen   = 24
	// maxNameLen is the longest node name a heartbeat carries; Kubernetes
	// object names are at most 253 bytes.
	maxNameLen = 253
	// maxPacket bounds a datagram: header plus the longest name.
	maxPacket = headerLen + maxNameLen
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
}

var errMalformed = errors.New("malformed heartbeat")

// encode appends the wire form of msg to b. The name must be 1..maxNameLen bytes
// (New checks the node name).
func encode(b []byte, msg message) []byte {
	b = append(b, wireMagic...)
	var flags byte
	if msg.ready {
		flags |= flagReady
	}
	b = append(b, wireVersion, byte(msg.kind), byte(len(msg.name)), flags)
	b = binary.BigEndian.AppendUint64(b, uint64(msg.incarnation))
	b = binary.BigEndian.AppendUint64(b, msg.seq)
	return append(b, msg.name...)
}

// decode parses one datagram. It fails with errMalformed for anything that is not
// exactly one well-formed heartbeat of this version. Unknown flags are ignored.
func decode(b []byte) (message, error) {
	if len(b) < headerLen || string(b[0:4]) != wireMagic {
		return message{}, fmt.Errorf("%w: %d bytes, no header", errMalformed, len(b))
	}
	if b[4] != wireVersion {
		return message{}, fmt.Errorf("%w: version %d", errMalformed, b[4])
	}
	k := kind(b[5])
	if k != kindHeartbeat && k != kindLeave {
		return message{}, fmt.Errorf("%w: kind %d", errMalformed, b[5])
	}
	n := int(b[6])
	if n == 0 || len(b) != headerLen+n {
		return message{}, fmt.Errorf("%w: name length %d in %d bytes", errMalformed, n, len(b))
	}
	return message{
		kind:        k,
		incarnation: int64(binary.BigEndian.Uint64(b[8:16])),
		seq:         binary.BigEndian.Uint64(b[16:24]),
		name:        string(b[headerLen:]),
		ready:       b[7]&flagReady != 0,
	}, nil
}

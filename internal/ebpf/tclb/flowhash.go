package tclb

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
	"github.com/svcnet/svcnet/internal/maglev"
	"github.com/svcnet/svcnet/internal/model"
)

// FlowHash is the programs' hash of a connection from client to frontend
// over proto (flow_hash in bpf/tclb.c): MurmurHash3 steps over the
// addresses (IPv4-mapped for IPv4), the ports and the protocol, each word
// as the program loads it from the packet (network byte order read in the
// host's), from a fixed initial value, so every node hashes a flow the
// same.
func FlowHash(client, frontend netip.AddrPort, proto model.Protocol) (uint32, error) {
	p, err := bpfaddr.ProtoNumber(proto)
	if err != nil {
		return 0, err
	}
	s, d := client.Addr().As16(), frontend.Addr().As16()
	h := uint32(0x5f3759df)
	for i := 0; i < 16; i += 4 {
		h = murmurMix(h, binary.NativeEndian.Uint32(s[i:]))
		h = murmurMix(h, binary.NativeEndian.Uint32(d[i:]))
	}
	h = murmurMix(h, uint32(wirePort(client.Port()))<<16|uint32(wirePort(frontend.Port())))
	h = murmurMix(h, uint32(p))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h, nil
}

// murmurMix is MurmurHash3's 32-bit step of h with k (mix in bpf/tclb.c).
func murmurMix(h, k uint32) uint32 {
	k *= 0xcc9e2d51
	k = bits.RotateLeft32(k, 15)
	k *= 0x1b873593
	h ^= k
	h = bits.RotateLeft32(h, 13)
	return h*5 + 0xe6546b64
}

// wirePort is port as the program holds it: its network-order bytes read
// in the host's order.
func wirePort(port uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], port)
	return binary.NativeEndian.Uint16(b[:])
}

// MaglevTable is a frontend's Maglev table as the programs hold it
// (MaglevSize slots): slot i names the index of the backend its flows go
// to.
type MaglevTable []uint32

// NewMaglevTable builds the table of backends, named by address and port
// in the order SetService is given them.
func NewMaglevTable(backends []netip.AddrPort) (MaglevTable, error) {
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = b.String()
	}
	return maglev.Table(names, MaglevSize)
}

// Pick returns which backend the programs give a new connection from
// client to frontend over proto, and the slot its flow hashes to.
func (t MaglevTable) Pick(client, frontend netip.AddrPort, proto model.Protocol) (pick int, slot uint32, err error) {
	h, err := FlowHash(client, frontend, proto)
	if err != nil {
		return 0, 0, fmt.Errorf("tclb: maglev pick: %w", err)
	}
	slot = h % uint32(len(t))
	return int(t[slot]), slot, nil
}

// Slots returns how many slots each of n backends holds.
func (t MaglevTable) Slots(n int) []int {
	out := make([]int, n)
	for _, b := range t {
		if int(b) < n {
			out[b]++
		}
	}
	return out
}

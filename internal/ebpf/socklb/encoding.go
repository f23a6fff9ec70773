package socklb

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/model"
)

// IP protocol numbers the programs compare with the socket's protocol.
const (
	ipprotoTCP  = 6
	ipprotoUDP  = 17
	ipprotoSCTP = 132
)

// protoNumber maps a Service protocol to the socket's IP protocol number.
func protoNumber(p model.Protocol) (uint8, error) {
	switch p {
	case model.ProtocolTCP:
		return ipprotoTCP, nil
	case model.ProtocolUDP:
		return ipprotoUDP, nil
	case model.ProtocolSCTP:
		return ipprotoSCTP, nil
	}
	return 0, fmt.Errorf("protocol %q: not TCP, UDP or SCTP", p)
}

// addrWords is addr as the programs hold it: 16 bytes of IPv6 (IPv4 mapped to
// ::ffff:a.b.c.d) in network order, read as four native-endian words, the
// layout of a __u32[4] in BPF memory.
func addrWords(addr netip.Addr) [4]uint32 {
	b := addr.As16()
	var w [4]uint32
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w
}

// portWord is port in network order read as a native-endian __u16, as the
// programs compare and write it.
func portWord(port uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], port)
	return binary.NativeEndian.Uint16(b[:])
}

// serviceKey is the services map key of a frontend.
func serviceKey(frontend netip.AddrPort, proto uint8) socklbSvcKey {
	return socklbSvcKey{
		Addr:  addrWords(frontend.Addr()),
		Port:  portWord(frontend.Port()),
		Proto: proto,
	}
}

// backendValue is the backends map value of a backend.
func backendValue(be netip.AddrPort) socklbBackend {
	return socklbBackend{Addr: addrWords(be.Addr()), Port: portWord(be.Port())}
}

// checkFrontend validates a frontend and its backends: ports set, backends
// of the frontend's family. An IPv4 frontend is an IPv4 address (not an
// IPv4-mapped IPv6 one, which is the same frontend to the programs).
func checkFrontend(frontend netip.AddrPort, backends []netip.AddrPort) error {
	if !frontend.IsValid() || frontend.Addr().Is4In6() || frontend.Addr().Zone() != "" {
		return fmt.Errorf("frontend %v: not an IPv4 or IPv6 address and port", frontend)
	}
	if frontend.Port() == 0 {
		return fmt.Errorf("frontend %v: port 0", frontend)
	}
	for _, be := range backends {
		if !be.IsValid() || be.Addr().Is4() != frontend.Addr().Is4() || be.Addr().Is4In6() || be.Addr().Zone() != "" {
			return fmt.Errorf("frontend %v: backend %v: not an address and port of the frontend's family", frontend, be)
		}
		if be.Port() == 0 {
			return fmt.Errorf("frontend %v: backend %v: port 0", frontend, be)
		}
	}
	return nil
}

// backendAddrPort decodes a backends map value (backendValue's inverse): an
// IPv4-mapped address is the IPv4 address it maps.
func backendAddrPort(v socklbBackend) netip.AddrPort {
	var b [16]byte
	for i, w := range v.Addr {
		binary.NativeEndian.PutUint32(b[4*i:], w)
	}
	var p [2]byte
	binary.NativeEndian.PutUint16(p[:], v.Port)
	return netip.AddrPortFrom(netip.AddrFrom16(b).Unmap(), binary.BigEndian.Uint16(p[:]))
}

// heldOf decodes a services map key (serviceKey's inverse) into a Held
// without backends.
func heldOf(k socklbSvcKey) (Held, error) {
	var b [16]byte
	for i, w := range k.Addr {
		binary.NativeEndian.PutUint32(b[4*i:], w)
	}
	var p [2]byte
	binary.NativeEndian.PutUint16(p[:], k.Port)
	h := Held{Frontend: netip.AddrPortFrom(netip.AddrFrom16(b).Unmap(), binary.BigEndian.Uint16(p[:]))}
	switch k.Proto {
	case ipprotoTCP:
		h.Protocol = model.ProtocolTCP
	case ipprotoUDP:
		h.Protocol = model.ProtocolUDP
	case ipprotoSCTP:
		h.Protocol = model.ProtocolSCTP
	default:
		return h, fmt.Errorf("socklb: services entry %v: IP protocol %d", h.Frontend, k.Proto)
	}
	return h, nil
}

// maxAffinity is kube-proxy's bound on sessionAffinityConfig.clientIP's
// timeoutSeconds (a day).
const maxAffinity = 86400 * time.Second

// affinitySeconds is an affinity timeout in whole seconds, rounded up; 0
// for none.
func affinitySeconds(d time.Duration) (uint32, error) {
	if d < 0 || d > maxAffinity {
		return 0, fmt.Errorf("affinity timeout %v: not within 0 and %v", d, maxAffinity)
	}
	return uint32((d + time.Second - 1) / time.Second), nil
}

// Scheduler is how a frontend's backend is chosen per connect (the IPVS
// schedulers that make sense per connection).
type Scheduler string

const (
	// Random chooses uniformly at random (the default).
	Random Scheduler = "random"
	// RoundRobin chooses the next backend in turn (IPVS rr).
	RoundRobin Scheduler = "rr"
	// SourceHash chooses by a hash of the client, its socket's network
	// namespace (a pod, or the node), so a client keeps its backend while
	// the set stays the same (IPVS sh).
	SourceHash Scheduler = "sh"
	// LeastConn chooses the backend with the fewest sockets connected to
	// it through this frontend and not closed yet (IPVS lc), ties at
	// random; a datagram of an unconnected UDP socket goes to one at random.
	LeastConn Scheduler = "lc"
)

// Schedulers are the accepted schedulers, the default first.
var Schedulers = []Scheduler{Random, RoundRobin, SourceHash, LeastConn}

// Policy is how a frontend chooses among its backends.
type Policy struct {
	// Scheduler chooses per connect ("": Random).
	Scheduler Scheduler
	// Affinity > 0 is ClientIP affinity: a client (a socket's network
	// namespace: a pod, or the node itself) that connects again within
	// Affinity of its last connect gets the same backend while that backend
	// is still one of the frontend's, as kube-proxy's sessionAffinity
	// ClientIP (refreshed by every connect); rounded up to whole seconds. It
	// overrides the scheduler for a client it remembers.
	Affinity time.Duration
}

// schedNumber maps a scheduler to the programs' SCHED_ value.
func schedNumber(s Scheduler) (uint32, error) {
	switch s {
	case "", Random:
		return 0, nil
	case RoundRobin:
		return 1, nil
	case SourceHash:
		return 2, nil
	case LeastConn:
		return 3, nil
	}
	return 0, fmt.Errorf("scheduler %q: want random, rr, sh or lc", s)
}

// schedOf is schedNumber's inverse.
func schedOf(n uint32) Scheduler {
	if n > 0 && int(n) < len(Schedulers) {
		return Schedulers[n]
	}
	return Random
}

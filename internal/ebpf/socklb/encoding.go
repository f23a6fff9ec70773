package socklb

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
)

// serviceKey is the services map key of a frontend.
func serviceKey(frontend netip.AddrPort, proto uint8) socklbSvcKey {
	return socklbSvcKey{
		Addr:  bpfaddr.AddrWords(frontend.Addr()),
		Port:  bpfaddr.PortWord(frontend.Port()),
		Proto: proto,
	}
}

// backendValue is the backends map value of a backend.
func backendValue(be netip.AddrPort) socklbBackend {
	return socklbBackend{Addr: bpfaddr.AddrWords(be.Addr()), Port: bpfaddr.PortWord(be.Port())}
}

// backendAddrPort decodes a backends map value (backendValue's inverse): an
// IPv4-mapped address is the IPv4 address it maps.
func backendAddrPort(v socklbBackend) netip.AddrPort {
	return netip.AddrPortFrom(bpfaddr.Addr(v.Addr), bpfaddr.Port(v.Port))
}

// heldOf decodes a services map key (serviceKey's inverse) into a Held
// without backends.
func heldOf(k socklbSvcKey) (Held, error) {
	h := Held{Frontend: netip.AddrPortFrom(bpfaddr.Addr(k.Addr), bpfaddr.Port(k.Port))}
	p, err := bpfaddr.Protocol(k.Proto)
	if err != nil {
		return h, fmt.Errorf("socklb: services entry %v: %w", h.Frontend, err)
	}
	h.Protocol = p
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

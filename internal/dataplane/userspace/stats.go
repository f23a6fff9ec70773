package userspace

import "sync/atomic"

// Stats counts what the proxy did since New, over all its proxy ports.
type Stats struct {
	// Connections is the TCP connections spliced to an endpoint.
	Connections uint64
	// FailedConnects is the connects to an endpoint that failed (TCP or
	// UDP); each one the budget allowed was followed by a retry.
	FailedConnects uint64
	// Refused is the TCP connections reset for want of a reachable endpoint.
	Refused uint64
	// UDPSessions is the UDP sessions opened.
	UDPSessions uint64
	// UDPDropped is the datagrams dropped: no endpoint, the session cap,
	// or an endpoint that refused them.
	UDPDropped uint64
}

type counters struct {
	connections, failedConnects, refused, udpSessions, udpDropped atomic.Uint64
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	c := &p.stats
	return Stats{
		Connections:    c.connections.Load(),
		FailedConnects: c.failedConnects.Load(),
		Refused:        c.refused.Load(),
		UDPSessions:    c.udpSessions.Load(),
		UDPDropped:     c.udpDropped.Load(),
	}
}

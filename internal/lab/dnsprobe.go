package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"github.com/svcnet/svcnet/internal/ipfamily"
)

// dnsQueryTimeout bounds one probe query.
const dnsQueryTimeout = time.Second

// dnsAnswer is what a probe learned from one reply.
type dnsAnswer struct {
	Rcode string       // "NOERROR", "NXDOMAIN", "SERVFAIL", ...
	Addrs []netip.Addr // the answer section's A or AAAA records
}

// dialFunc dials from a lab namespace (netns.Dialer).
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// query asks server, over UDP through dial, for name's addresses of family
// f: its A records, or its AAAA records. name must be fully qualified (end in
// a dot). An error means no reply arrived.
func query(ctx context.Context, dial dialFunc, server netip.AddrPort, name string, f ipfamily.Family) (dnsAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, dnsQueryTimeout)
	defer cancel()
	conn, err := dial(ctx, "udp", server.String())
	if err != nil {
		return dnsAnswer{}, fmt.Errorf("dial %s: %w", server, err)
	}
	defer conn.Close()
	q := new(dns.Msg)
	qtype := dns.TypeA
	if f == ipfamily.IPv6 {
		qtype = dns.TypeAAAA
	}
	q.SetQuestion(name, qtype)
	r, _, err := new(dns.Client).ExchangeWithConnContext(ctx, q, &dns.Conn{Conn: conn})
	if err != nil {
		return dnsAnswer{}, fmt.Errorf("query %s %s at %s: %w", name, dns.TypeToString[qtype], server, err)
	}
	a := dnsAnswer{Rcode: dns.RcodeToString[r.Rcode]}
	for _, rr := range r.Answer {
		var ip net.IP
		switch rec := rr.(type) {
		case *dns.A:
			ip = rec.A
		case *dns.AAAA:
			ip = rec.AAAA
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			a.Addrs = append(a.Addrs, addr.Unmap())
		}
	}
	return a, nil
}

// pollDNS queries server for name's addresses of family f every 200 ms until check accepts a reply, up
// to timeout (or ctx's end). gone, when set, is called before every query and
// ends the wait at once with its error (the server's process exited). The
// error names the last failure.
func pollDNS(ctx context.Context, timeout time.Duration, dial dialFunc, server netip.AddrPort, name string, f ipfamily.Family, check func(dnsAnswer) error, gone func() error) error {
	deadline := time.Now().Add(timeout)
	last := errors.New("no query sent")
	for time.Now().Before(deadline) {
		if gone != nil {
			if err := gone(); err != nil {
				return err
			}
		}
		a, err := query(ctx, dial, server, name, f)
		if err == nil {
			if err = check(a); err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("no good answer after %v: %w", timeout, last)
}

// synced accepts an authoritative answer (NOERROR or NXDOMAIN): svcnet dns
// answers SERVFAIL until its source has synced.
func synced(a dnsAnswer) error {
	if a.Rcode != "NOERROR" && a.Rcode != "NXDOMAIN" {
		return fmt.Errorf("rcode %s: not serving yet", a.Rcode)
	}
	return nil
}

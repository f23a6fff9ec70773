package difftest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Query is one question: a name (in the case it is sent in) and a type.
type Query struct {
	Name string
	Type uint16
}

// Key is what differences.md patterns match: the name lower-cased and fully
// qualified, a space, and the type's mnemonic ("web.alpha.svc.cluster.local. A").
func (q Query) Key() string {
	return strings.ToLower(dns.Fqdn(q.Name)) + " " + dns.TypeToString[q.Type]
}

func (q Query) String() string { return dns.Fqdn(q.Name) + " " + dns.TypeToString[q.Type] }

// EDNSSize is the EDNS0 UDP payload size every query advertises.
const EDNSSize = 4096

// Msg returns the query as a stub resolver sends it: RD set, EDNS0 with a
// 4096-byte UDP payload, no DO bit.
func (q Query) Msg() *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(q.Name), q.Type)
	m.RecursionDesired = true
	m.SetEdns0(EDNSSize, false)
	return m
}

// Exchanger sends queries over UDP with a per-try timeout and a bounded number
// of tries (a lost datagram on loopback is rare, but not impossible).
type Exchanger struct {
	Timeout time.Duration // per try; default 2s
	Tries   int           // default 3
}

// Exchange sends q to addr over UDP and returns the response, or the last error
// after Tries tries (or when ctx ends).
func (x Exchanger) Exchange(ctx context.Context, addr string, q Query) (*dns.Msg, error) {
	timeout, tries := x.Timeout, x.Tries
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	if tries <= 0 {
		tries = 3
	}
	c := &dns.Client{Net: "udp", Timeout: timeout, UDPSize: EDNSSize}
	var err error
	for range tries {
		if ctx.Err() != nil {
			break
		}
		var r *dns.Msg
		if r, _, err = c.ExchangeContext(ctx, q.Msg(), addr); err == nil {
			return r, nil
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return nil, fmt.Errorf("query %s to %s: %w", q, addr, err)
}

// WaitAnswer queries addr every 100ms until ok accepts a response or timeout
// passes; the error then names the query and the last response or error.
func WaitAnswer(ctx context.Context, addr string, q Query, timeout time.Duration, ok func(*dns.Msg) bool) error {
	deadline := time.Now().Add(timeout)
	x := Exchanger{Timeout: 500 * time.Millisecond, Tries: 1}
	last := "no response"
	for ctx.Err() == nil {
		r, err := x.Exchange(ctx, addr, q)
		switch {
		case err != nil:
			last = err.Error()
		case ok(r):
			return nil
		default:
			last = "response:\n" + r.String()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s at %s: no acceptable answer after %v; last %s", q, addr, timeout, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s at %s: %w (last %s)", q, addr, ctx.Err(), last)
}

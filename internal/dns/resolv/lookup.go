package resolv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/miekg/dns"
)

// Attempt is the outcome of one name tried by Lookup.
type Attempt struct {
	Name string
	// Rcode is the answer's rcode; -1 when no server answered.
	Rcode int
	// NoData is set for a NOERROR answer without records.
	NoData bool
	// Err says why no server answered (Rcode -1).
	Err error
}

// String renders the attempt as "name (NXDOMAIN)", "name (NODATA)",
// "name (SERVFAIL)" or "name (no answer: reason)".
func (a Attempt) String() string {
	switch {
	case a.Rcode < 0:
		return fmt.Sprintf("%s (no answer: %v)", a.Name, a.Err)
	case a.NoData:
		return a.Name + " (NODATA)"
	default:
		return fmt.Sprintf("%s (%s)", a.Name, dns.RcodeToString[a.Rcode])
	}
}

// NotFoundError is Lookup's (and LookupAddrs') error when no name tried has
// an answer.
type NotFoundError struct {
	Name string
	// Type is the record type asked; TypeAddrs for LookupAddrs.
	Type  uint16
	Tried []Attempt
}

// Error names every name tried with its outcome.
func (e *NotFoundError) Error() string {
	parts := make([]string, len(e.Tried))
	for i, a := range e.Tried {
		parts[i] = a.String()
	}
	typ := dns.TypeToString[e.Type]
	if e.Type == TypeAddrs {
		typ = "A/AAAA"
	}
	return fmt.Sprintf("%s %s: no answer; tried %s", e.Name, typ, strings.Join(parts, ", "))
}

// Lookup asks for name's records of type qtype, trying the names of
// c.Candidates in order, and returns the first answer that has records in its
// answer section (the name that got it is the question's). NXDOMAIN, NODATA
// and failures (SERVFAIL, REFUSED, no server answering) move on to the next
// name, as glibc's search does; when none has records the error is a
// *NotFoundError naming each name tried. Lookup stops when ctx ends.
func (c Config) Lookup(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	var found *dns.Msg
	err := c.search(ctx, name, qtype, func(cand string) (bool, Attempt) {
		r, err := c.Query(ctx, cand, qtype)
		switch {
		case err != nil:
			return false, Attempt{Name: cand, Rcode: -1, Err: err}
		case r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0:
			found = r
			return true, Attempt{}
		default:
			return false, Attempt{Name: cand, Rcode: r.Rcode, NoData: r.Rcode == dns.RcodeSuccess}
		}
	})
	return found, err
}

// search checks name, then calls try with each of c.Candidates(name) in
// order until one reports found; the attempts of the others make the
// *NotFoundError returned when none does. It stops when ctx ends.
func (c Config) search(ctx context.Context, name string, qtype uint16, try func(cand string) (bool, Attempt)) error {
	if name == "" || name == "." {
		return fmt.Errorf("lookup: empty name")
	}
	if _, ok := dns.IsDomainName(name); !ok {
		return fmt.Errorf("lookup %q: not a domain name", name)
	}
	nf := &NotFoundError{Name: name, Type: qtype}
	for _, cand := range c.Candidates(name) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("lookup %s: %w", name, err)
		}
		found, a := try(cand)
		if found {
			return nil
		}
		nf.Tried = append(nf.Tried, a)
	}
	return nf
}

// Query asks the name servers for one fully qualified name, without search:
// each server in turn, the whole list c.Attempts times, each query bounded by
// c.Timeout. The first NOERROR or NXDOMAIN answer is returned; other rcodes
// move on to the next server, and if no server gives one of those, the last
// answer received is returned. The error says why no server answered at all.
func (c Config) Query(ctx context.Context, fqdn string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(fqdn), qtype)
	m.RecursionDesired = true
	if c.EDNS0 {
		m.SetEdns0(ednsBufSize, false)
	}
	var (
		last *dns.Msg
		errs []error
	)
	for range max(c.Attempts, 1) {
		for _, srv := range c.Nameservers {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			m.Id = dns.Id()
			r, err := c.exchange(ctx, m, srv)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeNameError {
				return r, nil
			}
			last = r
		}
	}
	if last != nil {
		return last, nil
	}
	return nil, errors.Join(errs...)
}

// exchange asks one server, over UDP first (unless UseTCP) and over TCP when
// the UDP answer is truncated.
func (c Config) exchange(ctx context.Context, m *dns.Msg, srv string) (*dns.Msg, error) {
	network := "udp"
	if c.UseTCP {
		network = "tcp"
	}
	r, err := c.once(ctx, network, m, srv)
	if err == nil && r.Truncated && network == "udp" {
		r, err = c.once(ctx, "tcp", m, srv)
	}
	return r, err
}

// once is one exchange bounded by c.Timeout (5 s when unset); an answer to
// another question is an error.
func (c Config) once(ctx context.Context, network string, m *dns.Msg, srv string) (*dns.Msg, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl := &dns.Client{Net: network, Timeout: timeout}
	var (
		r   *dns.Msg
		err error
	)
	if c.Dial != nil {
		r, err = exchangeDialed(ctx, cl, c.Dial, network, m, srv)
	} else {
		r, _, err = cl.ExchangeContext(ctx, m, srv)
	}
	if err != nil {
		return nil, fmt.Errorf("%s over %s: %w", srv, network, err)
	}
	if len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, m.Question[0].Name) || r.Question[0].Qtype != m.Question[0].Qtype {
		return nil, fmt.Errorf("%s over %s: answer to another question", srv, network)
	}
	return r, nil
}

// exchangeDialed is one exchange over a connection that dial makes; miekg/dns
// frames it by its type (a net.PacketConn is UDP, any other stream is TCP).
func exchangeDialed(ctx context.Context, cl *dns.Client, dial func(ctx context.Context, network, address string) (net.Conn, error), network string, m *dns.Msg, srv string) (*dns.Msg, error) {
	conn, err := dial(ctx, network, srv)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	r, _, err := cl.ExchangeWithConnContext(ctx, m, &dns.Conn{Conn: conn})
	return r, err
}

// RData returns a record's data in presentation format, as `dig +short`
// prints it (an A record's address, an SRV's "priority weight port target").
func RData(rr dns.RR) string {
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

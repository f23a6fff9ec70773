package dns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
)

const (
	// forwardTimeout bounds one exchange with one upstream over one transport.
	forwardTimeout = 2 * time.Second
	// forwardUDPSize is the EDNS0 buffer size offered to upstreams (the DNS
	// flag day 2020 value: no IP fragmentation on common paths).
	forwardUDPSize = 1232
)

// forwarder sends questions outside the zone to upstream resolvers.
type forwarder struct {
	timeout time.Duration
}

// forward asks upstreams (IP:port), in order, req's question and returns the first
// answer received, whatever its rcode, with req's ID and question. Each is
// asked over UDP (EDNS0, buffer forwardUDPSize, req's DO and CD bits), and
// again over TCP when the UDP answer is truncated. An upstream that does not
// answer within the timeout, or answers another question, is skipped; when
// none answers, forward returns every upstream's error. It stops when ctx
// ends.
func (f *forwarder) forward(ctx context.Context, req *dns.Msg, upstreams []string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.Id = dns.Id()
	m.Opcode = dns.OpcodeQuery
	m.RecursionDesired = req.RecursionDesired
	m.CheckingDisabled = req.CheckingDisabled
	m.Question = []dns.Question{req.Question[0]}
	do := false
	if opt := req.IsEdns0(); opt != nil {
		do = opt.Do()
	}
	m.SetEdns0(forwardUDPSize, do)
	var errs []error
	for _, up := range upstreams {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		r, err := f.exchange(ctx, m, up)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Id = req.Id
		r.Question = []dns.Question{req.Question[0]}
		return r, nil
	}
	return nil, errors.Join(errs...)
}

// exchange asks one upstream over UDP, then over TCP if the answer is
// truncated.
func (f *forwarder) exchange(ctx context.Context, m *dns.Msg, up string) (*dns.Msg, error) {
	r, err := f.once(ctx, "udp", m, up)
	if err != nil || !r.Truncated {
		return r, err
	}
	return f.once(ctx, "tcp", m, up)
}

// once is one exchange with one upstream over one transport, bounded by the
// forwarder's timeout.
func (f *forwarder) once(ctx context.Context, network string, m *dns.Msg, up string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c := &dns.Client{Net: network, Timeout: f.timeout}
	r, _, err := c.ExchangeContext(ctx, m, up)
	if err != nil {
		return nil, fmt.Errorf("upstream %s over %s: %w", up, network, err)
	}
	if !r.Response || len(r.Question) != 1 || !sameQuestion(r.Question[0], m.Question[0]) {
		return nil, fmt.Errorf("upstream %s over %s: answer does not match the question %s", up, network, m.Question[0].String())
	}
	return r, nil
}

// sameQuestion compares questions, names case-insensitively.
func sameQuestion(a, b dns.Question) bool {
	return a.Qtype == b.Qtype && a.Qclass == b.Qclass && strings.EqualFold(a.Name, b.Name)
}

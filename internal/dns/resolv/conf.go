// Package resolv is a small stub resolver that behaves as glibc's does for
// what svcnet needs: it reads resolv.conf (nameserver, search, domain,
// options ndots/timeout/attempts/edns0/use-vc), expands a name through the
// search list by the ndots rule, asks the name servers in order, and retries
// over TCP when an answer is truncated. `svcnet resolve` is built on it, so a
// lab pod can check its cluster DNS without any other tool.
package resolv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DefaultPath is where the system's resolver configuration lives.
const DefaultPath = "/etc/resolv.conf"

// Limits and defaults as glibc's (resolv/res_init.c, resolv.h).
const (
	defaultNdots    = 1
	maxNdots        = 15
	defaultTimeout  = 5 * time.Second
	maxTimeout      = 30 * time.Second
	defaultAttempts = 2
	maxAttempts     = 5
	maxNameservers  = 3 // MAXNS: glibc ignores the ones after
	ednsBufSize     = 1200
)

// Config is a resolver configuration.
type Config struct {
	// Nameservers are IP:port, asked in order.
	Nameservers []string
	// Search are the search domains, as FQDNs (trailing dot), in order.
	Search []string
	// Ndots: a name with fewer dots is tried with the search domains first.
	Ndots int
	// Timeout bounds one query to one server; Attempts is how many times the
	// whole server list is tried.
	Timeout  time.Duration
	Attempts int
	// EDNS0 adds an OPT record (buffer 1200) to queries (options edns0).
	EDNS0 bool
	// UseTCP asks over TCP only (options use-vc).
	UseTCP bool
	// Dial, when set, makes every connection to a name server (network "udp"
	// or "tcp", address IP:port): netns.Dialer(ns) sends the queries from
	// inside a network namespace. nil dials from the caller's namespace.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// DefaultConfig is glibc's configuration without a resolv.conf: the local
// name server, no search domains, ndots 1.
func DefaultConfig() Config {
	return Config{Nameservers: []string{"127.0.0.1:53"}, Ndots: defaultNdots, Timeout: defaultTimeout, Attempts: defaultAttempts}
}

// ReadConfig reads the resolv.conf at path. A missing file gives
// DefaultConfig, as in glibc; an unreadable one is an error.
func ReadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultConfig(), nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("resolver config: %w", err)
	}
	defer f.Close()
	c, err := ParseConfig(f)
	if err != nil {
		return Config{}, fmt.Errorf("resolver config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses resolv.conf text as glibc does: comments start with '#'
// or ';'; "nameserver IP" (at most 3; invalid ones ignored); "search" and
// "domain" replace each other, the last one wins; "options" with ndots:N
// (capped at 15), timeout:N (seconds, capped at 30), attempts:N (capped at
// 5), edns0, use-vc; unknown keywords and options are ignored. Without any
// valid nameserver the local one (127.0.0.1) is used.
func ParseConfig(r io.Reader) (Config, error) {
	c, err := parseConfig(r)
	if err != nil {
		return c, err
	}
	if len(c.Nameservers) == 0 {
		c.Nameservers = DefaultConfig().Nameservers
	}
	return c, nil
}

// parseConfig is ParseConfig without the fallback nameserver.
func parseConfig(r io.Reader) (Config, error) {
	c := DefaultConfig()
	c.Nameservers = nil
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) < 2 || len(c.Nameservers) >= maxNameservers {
				continue
			}
			if a, err := netip.ParseAddr(f[1]); err == nil {
				c.Nameservers = append(c.Nameservers, netip.AddrPortFrom(a, 53).String())
			}
		case "domain":
			c.Search = nil
			if len(f) >= 2 {
				c.Search = []string{dns.Fqdn(f[1])}
			}
		case "search":
			c.Search = nil
			for _, d := range f[1:] {
				c.Search = append(c.Search, dns.Fqdn(d))
			}
		case "options":
			for _, o := range f[1:] {
				c.option(o)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// option applies one "options" item; malformed ones are ignored.
func (c *Config) option(o string) {
	name, val, _ := strings.Cut(o, ":")
	n, err := strconv.Atoi(val)
	switch name {
	case "ndots":
		if err == nil && n >= 0 {
			c.Ndots = min(n, maxNdots)
		}
	case "timeout":
		if err == nil && n >= 1 {
			c.Timeout = min(time.Duration(n)*time.Second, maxTimeout)
		}
	case "attempts":
		if err == nil && n >= 1 {
			c.Attempts = min(n, maxAttempts)
		}
	case "edns0":
		c.EDNS0 = true
	case "use-vc", "usevc":
		c.UseTCP = true
	}
}

// Candidates returns the names a lookup of name tries, in order, as glibc's
// res_nsearch: a name with a trailing dot is only itself; one with at least
// Ndots dots is tried as is first, then with each search domain; one with
// fewer is tried with each search domain first, then as is.
func (c Config) Candidates(name string) []string {
	if strings.HasSuffix(name, ".") {
		return []string{name}
	}
	var out []string
	asIs := strings.Count(name, ".") >= c.Ndots
	if asIs {
		out = append(out, name+".")
	}
	for _, d := range c.Search {
		if d == "." {
			out = append(out, name+".")
			continue
		}
		out = append(out, name+"."+d)
	}
	if !asIs {
		out = append(out, name+".")
	}
	return dedup(out)
}

// dedup drops repeated names, keeping the first.
func dedup(names []string) []string {
	seen := map[string]bool{}
	out := names[:0]
	for _, n := range names {
		k := strings.ToLower(n)
		if !seen[k] {
			seen[k] = true
			out = append(out, n)
		}
	}
	return out
}

// UpstreamsFrom returns the nameservers (IP:port) of the resolv.conf at path,
// for forwarding (CoreDNS's `forward . /etc/resolv.conf`). Unlike ReadConfig,
// a missing file or one without a valid nameserver is an error: a forwarder
// must not fall back to itself on 127.0.0.1.
func UpstreamsFrom(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("upstreams from %s: %w", path, err)
	}
	defer f.Close()
	c, err := parseConfig(f)
	if err != nil {
		return nil, fmt.Errorf("upstreams from %s: %w", path, err)
	}
	if len(c.Nameservers) == 0 {
		return nil, fmt.Errorf("upstreams from %s: no nameserver", path)
	}
	return c.Nameservers, nil
}

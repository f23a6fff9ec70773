package dns

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/dns/zone"
)

// Defaults of ServerConfig.
const (
	DefaultListen      = ":53"
	DefaultZone        = "cluster.local"
	DefaultTTL         = 5
	DefaultSyncTimeout = 30 * time.Second
)

// ServerConfig configures a Server. The zero value of each field means its
// default.
type ServerConfig struct {
	// Listen is the address (host:port) served on both UDP and TCP. Port 0
	// picks one free port usable for both.
	Listen string
	// Zone is the cluster domain ("cluster.local"), without trailing dot.
	Zone string
	// TTL is the TTL of the zone's records, in seconds (0 means the default:
	// a zone without caching cannot be configured here).
	TTL uint32
	// Upstreams are the resolvers names outside the zone are forwarded to, as
	// IP or IP:port (port 53 when absent), tried in order. Empty: such names
	// get REFUSED.
	Upstreams []string
	// SyncTimeout is how long the server waits for the source's first sync
	// before it logs an error (and again every SyncTimeout after). It keeps
	// answering SERVFAIL for in-zone names until the sync comes: answering
	// from a partial model would give wrong negative answers, which clients
	// cache.
	SyncTimeout time.Duration
	// Logger is used for all logs; the zero value means klog.Background().
	Logger klog.Logger
	// Metrics records the server's metrics; nil gives the server its own.
	Metrics *Metrics
}

// withDefaults returns c with every zero field set to its default.
func (c ServerConfig) withDefaults() ServerConfig {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Zone == "" {
		c.Zone = DefaultZone
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.SyncTimeout <= 0 {
		c.SyncTimeout = DefaultSyncTimeout
	}
	if c.Logger.GetSink() == nil {
		c.Logger = klog.Background()
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	return c
}

// validate checks the listen address, the zone (zone.Config.Validate) and the upstreams, and
// returns the upstreams as IP:port.
func (c ServerConfig) validate() ([]string, error) {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return nil, fmt.Errorf("dns listen address %q: %w", c.Listen, err)
	}
	if err := c.zoneConfig().Validate(); err != nil {
		return nil, err
	}
	ups := make([]string, 0, len(c.Upstreams))
	for _, u := range c.Upstreams {
		a, err := ParseServerAddr(u)
		if err != nil {
			return nil, fmt.Errorf("dns upstream: %w", err)
		}
		ups = append(ups, a)
	}
	return ups, nil
}

// zoneConfig is the zone package's part of c.
func (c ServerConfig) zoneConfig() zone.Config { return zone.Config{Zone: c.Zone, TTL: c.TTL} }

// ParseServerAddr parses a name server address given as IP or IP:port (IPv6
// as "fd00::1" or "[fd00::1]:53") and returns it as IP:port, port 53 when
// none is given. Host names are refused: resolving them could go through the
// very server being configured.
func ParseServerAddr(s string) (string, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53).String(), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("server %q: want IP or IP:port: %w", s, err)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("server %q: %q is not an IP address", s, host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", fmt.Errorf("server %q: bad port %q", s, port)
	}
	return netip.AddrPortFrom(a, uint16(p)).String(), nil
}

package zone

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// DefaultZone is the cluster domain used when Config.Zone is empty.
const DefaultZone = "cluster.local"

// SchemaVersion is the version of the specification the View implements, served
// as dns-version.<zone> TXT.
const SchemaVersion = "1.1.0"

// versionTTL is the TTL of the dns-version record: the spec's example and CoreDNS.
const versionTTL = 28800

// maxSOATTL caps the SOA's own TTL, as CoreDNS does.
const maxSOATTL = 300

// Config says which zone a View answers for and with which TTL.
type Config struct {
	// Zone is the cluster domain, e.g. "cluster.local"; case and a trailing dot
	// do not matter. Empty means DefaultZone.
	Zone string
	// TTL is the TTL of every record but dns-version (28800) and the SOA
	// (min(TTL, 300)); the SOA's minimum field is TTL. 0 is allowed: no caching.
	TTL uint32
}

// Validate reports a zone that is not a domain name, or is the root or a reverse
// zone (which would make the View answer for names it does not own).
func (c Config) Validate() error {
	z := c.zone()
	if _, ok := dns.IsDomainName(z); !ok || z == "." {
		return fmt.Errorf("dns zone %q: not a domain name", c.Zone)
	}
	if len(z) > 200 {
		return fmt.Errorf("dns zone %q: longer than 200 characters, leaving no room for names in it", c.Zone)
	}
	for _, r := range reverseZones {
		if dns.IsSubDomain(r, z) || dns.IsSubDomain(z, r) {
			return fmt.Errorf("dns zone %q: overlaps the reverse zone %s", c.Zone, r)
		}
	}
	return nil
}

// zone returns the configured zone in canonical form: lower case, fully qualified.
func (c Config) zone() string {
	z := strings.TrimSpace(c.Zone)
	if z == "" {
		z = DefaultZone
	}
	return dns.CanonicalName(z)
}

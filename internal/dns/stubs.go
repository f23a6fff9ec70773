package dns

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// The kube-dns ConfigMap (kube-system/kube-dns) is how clusters that ran
// kube-dns configure forwarding, and what Kubernetes' own e2e suite
// configures on any cluster DNS that is not CoreDNS: its keys are
//   - stubDomains: a JSON object, domain → JSON list of servers (IP or
//     IP:port): names in the domain are forwarded there;
//   - upstreamNameservers: a JSON list of at most three servers: every other
//     name outside the zone is forwarded there instead of the --upstream
//     resolvers.
const (
	KubeDNSConfigMapStubDomains = "stubDomains"
	KubeDNSConfigMapUpstreams   = "upstreamNameservers"
	maxUpstreamNameservers      = 3
)

// Forwarding says where names outside the zone go: Stubs by domain (the
// longest matching domain wins), everything else to Upstreams. The zero value
// refuses them.
type Forwarding struct {
	// Upstreams are IP:port, tried in order.
	Upstreams []string
	// Stubs maps a lower-case, fully qualified domain ("acme.local.") to its
	// servers (IP:port, tried in order).
	Stubs map[string][]string
}

// ParseKubeDNSConfigMap reads the data of a kube-dns ConfigMap. What it does
// not set is left to base: without upstreamNameservers the Upstreams are
// base's. name names the ConfigMap in errors; an error means nothing of the
// ConfigMap applies.
func ParseKubeDNSConfigMap(name string, data map[string]string, base Forwarding) (Forwarding, error) {
	out := Forwarding{Upstreams: base.Upstreams}
	if s, ok := data[KubeDNSConfigMapUpstreams]; ok && strings.TrimSpace(s) != "" {
		var list []string
		if err := json.Unmarshal([]byte(s), &list); err != nil {
			return Forwarding{}, fmt.Errorf("ConfigMap %s: %s: want a JSON list of servers: %w", name, KubeDNSConfigMapUpstreams, err)
		}
		if len(list) > maxUpstreamNameservers {
			return Forwarding{}, fmt.Errorf("ConfigMap %s: %s: %d servers, at most %d", name, KubeDNSConfigMapUpstreams, len(list), maxUpstreamNameservers)
		}
		ups, err := parseServers(list)
		if err != nil {
			return Forwarding{}, fmt.Errorf("ConfigMap %s: %s: %w", name, KubeDNSConfigMapUpstreams, err)
		}
		out.Upstreams = ups
	}
	if s, ok := data[KubeDNSConfigMapStubDomains]; ok && strings.TrimSpace(s) != "" {
		var stubs map[string][]string
		if err := json.Unmarshal([]byte(s), &stubs); err != nil {
			return Forwarding{}, fmt.Errorf("ConfigMap %s: %s: want a JSON object of domain to servers: %w", name, KubeDNSConfigMapStubDomains, err)
		}
		out.Stubs = map[string][]string{}
		for d, list := range stubs {
			fqdn := dns.CanonicalName(d)
			if _, ok := dns.IsDomainName(fqdn); !ok || fqdn == "." {
				return Forwarding{}, fmt.Errorf("ConfigMap %s: %s: %q is not a domain name", name, KubeDNSConfigMapStubDomains, d)
			}
			if len(list) == 0 {
				return Forwarding{}, fmt.Errorf("ConfigMap %s: %s: domain %q has no servers", name, KubeDNSConfigMapStubDomains, d)
			}
			ups, err := parseServers(list)
			if err != nil {
				return Forwarding{}, fmt.Errorf("ConfigMap %s: %s: domain %q: %w", name, KubeDNSConfigMapStubDomains, d, err)
			}
			out.Stubs[fqdn] = ups
		}
	}
	return out, nil
}

func parseServers(list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for _, s := range list {
		a, err := ParseServerAddr(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// route returns the servers name (lower case, fully qualified) is forwarded
// to: the stub domain's with the longest match, else the upstreams; nil when
// none.
func (f Forwarding) route(name string) []string {
	best := ""
	for d := range f.Stubs {
		if dns.IsSubDomain(d, name) && len(d) > len(best) {
			best = d
		}
	}
	if best != "" {
		return f.Stubs[best]
	}
	return f.Upstreams
}

// String describes f for logs, deterministically.
func (f Forwarding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "upstreams %v", f.Upstreams)
	domains := make([]string, 0, len(f.Stubs))
	for d := range f.Stubs {
		domains = append(domains, d)
	}
	slices.Sort(domains)
	for _, d := range domains {
		fmt.Fprintf(&b, ", %s → %v", d, f.Stubs[d])
	}
	return b.String()
}

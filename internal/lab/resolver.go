package lab

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/svcnet/svcnet/internal/dns/resolv"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// How a place of the lab resolves the names a lab command dials (lab curl's
// target, Lab.HTTPGet): as the place's own resolver would, never in the
// host's namespace nor with the host's resolv.conf.
//
//   - A pod: its /etc/netns/NAME.pod.NS.POD/resolv.conf, the kubelet's
//     ClusterFirst configuration (nameserver ClusterDNS, search
//     NS.svc.cluster.local svc.cluster.local cluster.local, ndots:5).
//   - A node: its /etc/netns/NAME.nodeN/resolv.conf, written by Up. A real
//     node's resolver is its host's, which knows nothing of cluster.local;
//     the lab's nodes are configured as nodes that resolve cluster names:
//     nameserver ClusterDNS, which a node reaches through its own proxy, with
//     the search path of a hostNetwork pod of namespace default with
//     dnsPolicy ClusterFirstWithHostNet, so that a short name means from a
//     node what it means from a pod in default. The nodes' agents resolve no
//     names (they reach their state at a file or an IP address), so nothing
//     they do waits on the DNS pod whose traffic they carry.
//   - The client: nothing. It stands outside the cluster, the lab has no name
//     server outside the cluster, and the cluster DNS is a ClusterIP, which
//     an external host does not reach: a name dialed from the client is
//     refused (ErrNoResolver); give it an address.
//
// The file is read as glibc reads it (resolv.ReadConfig: search list,
// ndots, timeout, attempts) and names are looked up as getaddrinfo does
// (resolv.Config.LookupAddrs); the queries are sent from inside the place's
// network namespace, so they cross its node's proxy like the place's own.
// A name that does not resolve is a *ResolveError naming the name, the place
// and the resolver asked, with every name tried and its answer.

// ErrNoResolver is the client's answer to a name: it has no resolver in the
// lab.
var ErrNoResolver = errors.New("the external client is outside the cluster and has no name server in the lab " +
	"(the cluster DNS is a ClusterIP, for nodes and pods): " +
	"give it an address (a LoadBalancer IP, an externalIP, or a node's IP and NodePort)")

// ResolveError is a name a place could not resolve.
type ResolveError struct {
	// Name is the name as given.
	Name string
	// Place is "pod NS/NAME", "node nodeN" or "the client".
	Place string
	// Resolver is what was asked: the name servers, search list and ndots
	// of the place's resolv.conf (and its path), or "none".
	Resolver string
	Err      error
}

func (e *ResolveError) Error() string {
	return fmt.Sprintf("resolve %q from %s (resolver: %s): %v", e.Name, e.Place, e.Resolver, e.Err)
}

func (e *ResolveError) Unwrap() error { return e.Err }

// placeResolver resolves names as one place does.
type placeResolver struct {
	place string
	// conf is the place's resolv.conf; "" for a place without a resolver.
	conf string
	// dial sends the queries from inside the place (netns.Dialer).
	dial dialFunc
}

// resolverOf returns p's resolver, whose queries dial sends.
func (l *Lab) resolverOf(p Place, dial dialFunc) placeResolver {
	r := placeResolver{place: l.placeName(p), dial: dial}
	if p.NS != l.c.Names.Client() {
		r.conf = topology.ResolvConfPath(p.NS)
	}
	return r
}

// placeName names p in messages.
func (l *Lab) placeName(p Place) string {
	switch {
	case p.Pod != nil:
		return "pod " + p.Pod.Namespace + "/" + p.Pod.Name
	case p.NS == l.c.Names.Client():
		return "the client"
	}
	for i := 1; i <= l.c.Info.Nodes; i++ {
		if p.NS == l.c.Names.Node(i) {
			return "node " + topology.NodeName(i)
		}
	}
	return "namespace " + p.NS
}

// lookup returns name's addresses, or a *ResolveError.
func (r placeResolver) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	fail := func(resolver string, err error) error {
		return &ResolveError{Name: name, Place: r.place, Resolver: resolver, Err: err}
	}
	if r.conf == "" {
		return nil, fail("none", ErrNoResolver)
	}
	if _, err := os.Stat(r.conf); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fail(r.conf, fmt.Errorf("no resolver configuration: %w", err))
		}
		return nil, fail(r.conf, err)
	}
	cfg, err := resolv.ReadConfig(r.conf)
	if err != nil {
		return nil, fail(r.conf, err)
	}
	cfg.Dial = r.dial
	addrs, err := cfg.LookupAddrs(ctx, name)
	if err != nil {
		return nil, fail(describeResolver(cfg, r.conf), err)
	}
	return addrs, nil
}

// describeResolver renders cfg as "10.96.0.10:53, search a b c, ndots 5
// (PATH)".
func describeResolver(cfg resolv.Config, path string) string {
	search := make([]string, len(cfg.Search))
	for i, s := range cfg.Search {
		search[i] = strings.TrimSuffix(s, ".")
	}
	s := strings.Join(cfg.Nameservers, " ")
	if len(search) > 0 {
		s += ", search " + strings.Join(search, " ")
	}
	return fmt.Sprintf("%s, ndots %d (%s)", s, cfg.Ndots, path)
}

// resolvingDial returns a dial function for the place: an address whose host
// is an IP is dialed as is; a name is resolved by r and its addresses of the
// network's family ("tcp4", "udp6"; any for "tcp", "udp") are dialed in
// order until one connects. A name that does not resolve is a
// *ResolveError, and nothing is dialed.
func resolvingDial(r placeResolver, dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s %s from %s: %w", network, addr, r.place, err)
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return dial(ctx, network, addr)
		}
		addrs, err := r.lookup(ctx, host)
		if err != nil {
			return nil, err
		}
		var first error
		tried := 0
		for _, a := range addrs {
			if (strings.HasSuffix(network, "4") && !a.Is4()) || (strings.HasSuffix(network, "6") && !a.Is6()) {
				continue
			}
			tried++
			c, err := dial(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		if tried == 0 {
			return nil, &ResolveError{Name: host, Place: r.place, Resolver: r.conf,
				Err: fmt.Errorf("no address for %s among %v", network, addrs)}
		}
		return nil, first
	}
}

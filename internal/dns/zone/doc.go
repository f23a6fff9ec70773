// Package zone answers DNS questions about a cluster from one model.Snapshot, by
// the Kubernetes DNS-Based Service Discovery specification, schema 1.1.0
// (https://github.com/kubernetes/dns/blob/master/docs/specification.md, "the
// spec" below). It is pure: Build indexes a snapshot into an immutable View,
// View.Update makes the View of a later snapshot from the Services that changed,
// and View.Answer turns a query into the authoritative reply, with no I/O, no
// clock and no goroutine. The server (package internal/dns) adds EDNS0, truncation,
// forwarding and metrics.
//
// What the View answers, under the cluster zone <zone> (every comparison is
// case-insensitive; owner names echo the question's case):
//
//   - dns-version.<zone> TXT "1.1.0" (spec 2.2).
//   - <svc>.<ns>.svc.<zone>: A/AAAA of the ClusterIPs (spec 2.3.1); for a headless
//     Service one A/AAAA per published endpoint address, NXDOMAIN when there is
//     none (spec 2.4.1); for an ExternalName Service a CNAME to the external name,
//     whatever the type asked (spec 2.5), chased when it points into <zone>.
//   - <hostname>.<svc>.<ns>.svc.<zone>: the addresses of the published endpoints
//     with that hostname: the endpoint's hostname field, else its IP with "." or
//     ":" replaced by "-" (spec 2.1 "hostname"; CoreDNS's choice).
//   - _<port>._<proto>.<svc>.<ns>.svc.<zone> SRV (spec 2.3.2, 2.4.2): one target
//     <svc>.<ns>.svc.<zone> per matching port of a ClusterIP Service, one target
//     <hostname>.<svc>.<ns>.svc.<zone> per published endpoint and matching
//     endpoint port of a headless one; the additional section holds the targets'
//     addresses. SRV at <svc>.<ns>.svc.<zone> itself lists every port, named or
//     not (CoreDNS's extension).
//   - <a>-<b>-<c>-<d>.<ns>.pod.<zone> A, and the dashed IPv6 form AAAA, for any
//     namespace without checking that such a Pod exists ("pods insecure", spec 2.6).
//   - PTR under in-addr.arpa and ip6.arpa for every ClusterIP (spec 2.3.3) and
//     every published endpoint address (spec 2.4.3), the ClusterIP winning.
//   - SOA and NS at the apex of <zone>.
//
// An endpoint is published when it is ready, or its Service has
// publishNotReadyAddresses or the service.alpha.kubernetes.io/tolerate-unready-
// endpoints annotation (spec 2.1 "ready").
//
// Negative answers are exact: NXDOMAIN for a name that does not exist, NOERROR with
// no answer (NODATA) for a name that exists without records of the type asked; both
// carry the zone's SOA in the authority section (RFC 2308). A namespace exists under
// svc.<zone> when it holds a Service. Wildcard labels ("*", "any") have no meaning:
// schema 1.1.0 has no wildcard records, and CoreDNS dropped them in 1.9.0, so "*" is
// an ordinary label that matches no Service (NXDOMAIN).
//
// Where the spec is silent the answers follow CoreDNS's kubernetes plugin with the
// kubeadm Corefile (pods insecure, fallthrough in-addr.arpa ip6.arpa): SOA fields,
// SRV weights, the name grammar, endpoint-name queries on ClusterIP Services, PTR
// for endpoints of every Service, the answer to A on _<port>._<proto> names.
//
// Deliberate differences from CoreDNS, each with what justifies it:
//
//   - <ns>.svc.<zone> of a namespace without Services is NXDOMAIN (CoreDNS: NODATA
//     for any label): the name does not exist (RFC 1034 4.3.2).
//   - TXT, and every other type, for a name that does not exist is NXDOMAIN
//     (CoreDNS: NODATA for TXT on any name); dns-version.<zone> of another type is
//     NODATA (CoreDNS: NXDOMAIN), the name exists (spec 2.2).
//   - An ExternalName Service answers its CNAME to every type (CoreDNS: A, AAAA
//     and CNAME only, NODATA otherwise), also when the name looks like an IPv4
//     address (CoreDNS: NXDOMAIN) (spec 2.5, RFC 1034 3.6.2). Followed inside the
//     zone, the CNAME stays in the answer and the rcode is the target's (RFC
//     6604); CoreDNS drops the CNAME when the target has no records. Names below
//     an ExternalName Service are NXDOMAIN (CoreDNS: the CNAME for A and AAAA).
//   - Names below <dashed-ip>.<ns>.pod.<zone> are NXDOMAIN (CoreDNS: the pod's
//     address); spec 2.6 defines only the one name.
//   - SOA is answered at the apex only; elsewhere it is NODATA or NXDOMAIN
//     (CoreDNS: the zone's SOA, owned by the zone, for any name asked), RFC 1034
//     4.3.2. A known reverse name asked for another type than PTR is NODATA
//     (CoreDNS: falls through to the upstreams).
//   - NS names kube-dns.kube-system.svc.<zone> with its ClusterIPs as glue when
//     that Service exists, else ns.dns.<zone> without glue (CoreDNS: the Service
//     whose endpoint is its own pod IP, else its local IPs).
//   - A ClusterIP Service without ports still has its A/AAAA records (spec 2.3.1;
//     CoreDNS: NXDOMAIN; the API server rejects such a Service anyway). The
//     tolerate-unready-endpoints annotation publishes endpoints (spec 2.1).
//   - Class other than IN or ANY, AXFR and IXFR are REFUSED (CoreDNS answers them
//     as class IN queries, without records).
//   - An endpoint hostname that is not a DNS label is replaced by the dashed IP;
//     endpoints of slices whose Service does not exist get no PTR.
//   - The SOA serial is the snapshot's revision (CoreDNS: the time of the last
//     change); RA is left to the server (CoreDNS sets it on positive answers).
package zone

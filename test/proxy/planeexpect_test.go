package proxy_test

import (
	"net/netip"

	usplane "github.com/svcnet/svcnet/internal/dataplane/userspace"
	"github.com/svcnet/svcnet/internal/testbin"
)

// What the traffic of a test does where the plane under test truly differs
// from the kernel planes (nftables, iptables), each with its reason. A test
// asks these rather than the plane's name, so that every difference is
// stated once, here, and nowhere weakens an assertion by accident.

// userspacePlane reports whether the plane under test is the userspace
// plane: a socket proxy on the node (a proxy port per Service port, the
// kernel only redirecting to it), where the kernel planes translate the
// client's own packets to the endpoint.
func userspacePlane() bool { return testbin.DataPlane() == usplane.Name }

// seenAs returns the source address an endpoint sees for a Service
// connection from src that the plane does not masquerade. The kernel
// planes DNAT the client's packets and keep their source: src. The
// userspace plane proxies them: the endpoint's connection is the proxy's
// own, from the node, whose source is the address routing picks for the
// pod's route, the node's address towards its pods (podGateway, podGW6);
// under every traffic policy and --detect-local-mode the client's address
// is lost, as in kube-proxy's userspace mode
// (internal/dataplane/userspace/doc.go, "The client's address is lost").
func seenAs(src netip.Addr) netip.Addr {
	if !userspacePlane() {
		return src
	}
	if src.Is4() {
		return podGateway
	}
	return podGW6
}

// planeMasquerades reports whether the plane masquerades Service traffic
// in postrouting, asked for by a packet mark (--masquerade-bit). The
// userspace plane has no masquerade and no mark: it NATs only the
// destination (the redirect to the proxy port), and the connection the
// endpoint sees comes from the node already.
func planeMasquerades() bool { return !userspacePlane() }

// restartKeepsTraffic reports whether Service traffic outlives the proxy
// process. On the kernel planes it does: the rules and conntrack entries
// stay in the kernel, so no request fails across a stop, a crash and a
// restart, and the new process adopts the rules as it finds them. On the
// userspace plane it does not: the proxy ports are sockets of the process,
// so the proxied connections it carries end with it, and until the new
// process's first sync the table it left redirects new connections to
// closed ports, where the kernel refuses them; that sync replaces the
// table, the new ports being other numbers. The rule that a crash or
// restart never drops established traffic does not hold on that plane
// (internal/dataplane/userspace/doc.go, "A restart"); what it keeps is
// that traffic fails only while no process serves it.
func restartKeepsTraffic() bool { return !userspacePlane() }

// planeRetries reports whether a connection whose endpoint refuses it
// goes to another endpoint. On the userspace plane it does: the proxy owns
// the client's connection and, when its own connect fails, dials another
// endpoint within a bounded budget, so a pod that died before the
// endpoints caught up costs a retry, not a failed request. The kernel
// planes pick an endpoint once per flow (the DNAT), and a dead pick fails
// the client's connect: the articles' "iptables cannot retry".
func planeRetries() bool { return userspacePlane() }

// sctpServed reports whether the plane under test serves SCTP Services.
// The userspace plane does not: Go's net package has no SCTP sockets, and
// a byte-stream splice would lose SCTP's message boundaries and streams
// (internal/dataplane/userspace/doc.go, "SCTP").
func sctpServed() bool { return !userspacePlane() }

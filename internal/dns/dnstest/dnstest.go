// Package dnstest starts DNS servers (github.com/miekg/dns) on sockets a test
// opened, for the tests of packages that talk to one: a normal package meant
// for _test.go files, as internal/kubetest is.
package dnstest

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// Serve serves h on pc and on l (either may be nil), returns once both
// serve, and shuts them down, waiting for their goroutines, when t ends.
func Serve(t testing.TB, h dns.Handler, pc net.PacketConn, l net.Listener) {
	t.Helper()
	var servers []*dns.Server
	if pc != nil {
		servers = append(servers, &dns.Server{PacketConn: pc, Handler: h})
	}
	if l != nil {
		servers = append(servers, &dns.Server{Listener: l, Handler: h})
	}
	for _, s := range servers {
		up := make(chan struct{})
		s.NotifyStartedFunc = func() { close(up) }
		done := make(chan struct{})
		go func() { defer close(done); _ = s.ActivateAndServe() }()
		<-up
		t.Cleanup(func() { _ = s.Shutdown(); <-done })
	}
}

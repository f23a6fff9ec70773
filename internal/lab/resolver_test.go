package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// clusterDNSFake is the cluster DNS on loopback: it answers A records from a
// table (NXDOMAIN for other names, NODATA for AAAA) and records the questions.
type clusterDNSFake struct {
	addr  string
	a     map[string]string // FQDN → IPv4
	mu    sync.Mutex
	asked []string
}

func startClusterDNSFake(t *testing.T, a map[string]string) *clusterDNSFake {
	t.Helper()
	f := &clusterDNSFake{a: a}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = pc.LocalAddr().String()
	dnstest.Serve(t, f, pc, nil)
	return f
}

func (f *clusterDNSFake) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	f.mu.Lock()
	f.asked = append(f.asked, q.Name+" "+dns.TypeToString[q.Qtype])
	f.mu.Unlock()
	resp := new(dns.Msg).SetReply(req)
	ip, ok := f.a[strings.ToLower(q.Name)]
	switch {
	case !ok:
		resp.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		rr, _ := dns.NewRR(fmt.Sprintf("%s 5 IN A %s", q.Name, ip))
		resp.Answer = append(resp.Answer, rr)
	}
	_ = w.WriteMsg(resp)
}

func (f *clusterDNSFake) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// placeDial stands for netns.Dialer: queries to ClusterDNS:53 reach the fake,
// and every other address is recorded and refused.
type placeDial struct {
	dnsAddr string
	mu      sync.Mutex
	dialed  []string
}

func (d *placeDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == topology.ClusterDNS.String()+":53" {
		var nd net.Dialer
		return nd.DialContext(ctx, network, d.dnsAddr)
	}
	d.mu.Lock()
	d.dialed = append(d.dialed, network+" "+addr)
	d.mu.Unlock()
	return nil, errors.New("connection refused")
}

func testLab() *Lab {
	return &Lab{c: &cluster.Cluster{Names: topology.Names{Lab: "t"}, Info: &cluster.Info{Nodes: 3}}}
}

// writeResolvConf writes text as a place's resolv.conf and returns its path.
func writeResolvConf(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A pod's name goes through its search path (ndots 5) to the cluster DNS,
// asked from the place; the address found is dialed with the port.
func TestResolvingDialSearchesThePodsPath(t *testing.T) {
	f := startClusterDNSFake(t, map[string]string{"web-0.nginx-hl.default.svc.cluster.local.": "192.168.2.5"})
	d := &placeDial{dnsAddr: f.addr}
	r := placeResolver{place: "pod default/client-1", conf: writeResolvConf(t, topology.ClusterResolvConf("default", topology.Stack(nil).ClusterDNS())), dial: d.dial}
	_, err := resolvingDial(r, d.dial)(context.Background(), "tcp", "web-0.nginx-hl:80")
	if err == nil || errors.As(err, new(*ResolveError)) {
		t.Fatalf("dial: %v, want the fake's refusal of the resolved address", err)
	}
	if diff := cmp.Diff([]string{"tcp 192.168.2.5:80"}, d.dialed); diff != "" {
		t.Errorf("dialed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"web-0.nginx-hl.default.svc.cluster.local. A", "web-0.nginx-hl.default.svc.cluster.local. AAAA"}, f.questions()); diff != "" {
		t.Errorf("questions (-want +got):\n%s", diff)
	}
}

// An address is dialed as is: nothing is asked.
func TestResolvingDialPassesAddresses(t *testing.T) {
	f := startClusterDNSFake(t, nil)
	d := &placeDial{dnsAddr: f.addr}
	r := placeResolver{place: "the client", dial: d.dial}
	for _, addr := range []string{"172.26.236.180:80", "[fd00:26:236::b4]:80"} {
		_, _ = resolvingDial(r, d.dial)(context.Background(), "tcp", addr)
	}
	if diff := cmp.Diff([]string{"tcp 172.26.236.180:80", "tcp [fd00:26:236::b4]:80"}, d.dialed); diff != "" {
		t.Errorf("dialed (-want +got):\n%s", diff)
	}
	if q := f.questions(); len(q) > 0 {
		t.Errorf("asked %v for addresses", q)
	}
}

// A name that does not resolve is a *ResolveError naming the name, the place
// and the resolver asked, with every name tried; nothing is dialed.
func TestResolvingDialErrors(t *testing.T) {
	f := startClusterDNSFake(t, map[string]string{"web.default.svc.cluster.local.": "10.96.0.20"})
	podConf := writeResolvConf(t, topology.ClusterResolvConf("default", topology.Stack(nil).ClusterDNS()))
	for _, tc := range []struct {
		name, place, conf, network, host string
		is                               error
		want                             []string
	}{{
		name: "NXDOMAIN", place: "pod default/client-1", conf: podConf, network: "tcp", host: "nosuch",
		want: []string{`resolve "nosuch" from pod default/client-1`,
			"resolver: 10.96.0.10:53, search default.svc.cluster.local svc.cluster.local cluster.local, ndots 5 (" + podConf + ")",
			"nosuch.default.svc.cluster.local. (NXDOMAIN)", "nosuch. (NXDOMAIN)"},
	}, {
		name: "client", place: "the client", conf: "", network: "tcp", host: "web", is: ErrNoResolver,
		want: []string{`resolve "web" from the client (resolver: none)`, "outside the cluster", "give it an address"},
	}, {
		name: "no resolv.conf", place: "node node1", conf: "/nonexistent/resolv.conf", network: "tcp", host: "web",
		want: []string{`resolve "web" from node node1 (resolver: /nonexistent/resolv.conf): no resolver configuration`},
	}, {
		name: "no address of the family", place: "pod default/client-1", conf: podConf, network: "tcp6", host: "web",
		want: []string{`resolve "web" from pod default/client-1`, "no address for tcp6 among [10.96.0.20]"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := &placeDial{dnsAddr: f.addr}
			r := placeResolver{place: tc.place, conf: tc.conf, dial: d.dial}
			_, err := resolvingDial(r, d.dial)(context.Background(), tc.network, tc.host+":80")
			var re *ResolveError
			if !errors.As(err, &re) {
				t.Fatalf("error %v, want a *ResolveError", err)
			}
			if re.Name != tc.host || re.Place != tc.place {
				t.Errorf("name %q place %q, want %q %q", re.Name, re.Place, tc.host, tc.place)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%s\ndoes not say\n%s", err, w)
				}
			}
			if len(d.dialed) > 0 {
				t.Errorf("dialed %v after a failed lookup", d.dialed)
			}
		})
	}
}

func TestPlaceName(t *testing.T) {
	l := testLab()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "api-1"}}
	for _, tc := range []struct {
		p    Place
		want string
	}{
		{Place{NS: l.c.Names.Pod("other", "api-1"), Pod: pod}, "pod other/api-1"},
		{Place{NS: l.c.Names.Node(2)}, "node node2"},
		{Place{NS: l.c.Names.Client()}, "the client"},
	} {
		if got := l.placeName(tc.p); got != tc.want {
			t.Errorf("placeName(%s) = %q, want %q", tc.p.NS, got, tc.want)
		}
	}
	// The client has no resolver configuration; the others have their file.
	if r := l.resolverOf(Place{NS: l.c.Names.Client()}, nil); r.conf != "" {
		t.Errorf("client resolver %q, want none", r.conf)
	}
	if r := l.resolverOf(Place{NS: l.c.Names.Node(1)}, nil); r.conf != "/etc/netns/t.node1/resolv.conf" {
		t.Errorf("node1 resolver %q", r.conf)
	}
}

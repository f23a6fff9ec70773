package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	miekgdns "github.com/miekg/dns"
)

// dnsFlags are the flags `svcnet dns` must have.
var dnsFlags = []string{
	"--kubeconfig", "--state", "--listen", "--zone", "--ttl", "--upstream",
	"--metrics-bind-address", "--sync-timeout", "-v,",
}

func TestDNSHelp(t *testing.T) {
	out, errOut, code := run(t, "dns", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, f := range dnsFlags {
		if !strings.Contains(out, f) {
			t.Errorf("--help lacks %s:\n%s", f, out)
		}
	}
	for _, def := range []string{`":53"`, `"cluster.local"`, "(default 5)", `"127.0.0.1:9153"`, "30s"} {
		if !strings.Contains(out, def) {
			t.Errorf("--help does not show the default %s:\n%s", def, out)
		}
	}
	out, _, _ = run(t, "--help")
	for _, c := range []string{"dns ", "resolve "} {
		if !strings.Contains(out, c) {
			t.Errorf("svcnet --help does not list %q:\n%s", c, out)
		}
	}
}

func TestDNSRefusesBadFlags(t *testing.T) {
	dir := articleCopy(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no source of state"},
		{[]string{"--state", dir, "--kubeconfig", "x"}, "exclusive"},
		{[]string{"--state", dir, "--ttl", "0"}, "--ttl"},
		{[]string{"--state", dir, "--upstream", "dns.example"}, "dns.example"},
		{[]string{"--state", dir, "--zone", "in-addr.arpa"}, "in-addr.arpa"},
		{[]string{"--state", dir, "--listen", "53"}, "53"},
		{[]string{"--state", dir, "--metrics-bind-address", "9153"}, "--metrics-bind-address"},
	} {
		_, errOut, code := run(t, append([]string{"dns"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("svcnet dns %q: exit %d, %q; want an error naming %q", tc.args, code, errOut, tc.want)
		}
	}
}

// freePort returns a loopback port that was free on UDP and TCP a moment
// ago (another process may take it before the test does: rare, and the test
// then fails loudly rather than hangs).
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := pc.LocalAddr().(*net.UDPAddr).Port
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		pc.Close()
		if err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// TestDNSServesStateFile runs `svcnet dns --state` in-process: it answers
// the article's Service from the manifests and serves /healthz and /metrics.
func TestDNSServesStateFile(t *testing.T) {
	dir := articleCopy(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newRootCommand()
	cmd.SetArgs([]string{"dns", "--state", dir, "--listen", addr, "--metrics-bind-address", metricsAddr})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("svcnet dns: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("svcnet dns did not stop")
		}
	}()

	c := &miekgdns.Client{Timeout: time.Second}
	var r *miekgdns.Msg
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		select {
		case err := <-errc:
			t.Fatalf("svcnet dns stopped: %v\n%s", err, out.String())
		default:
		}
		var err error
		r, _, err = c.Exchange(new(miekgdns.Msg).SetQuestion("My-Nginx.default.svc.cluster.local.", miekgdns.TypeA), addr)
		if err == nil && r.Rcode == miekgdns.RcodeSuccess {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r == nil || r.Rcode != miekgdns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("my-nginx not answered: %v", r)
	}
	if a, ok := r.Answer[0].(*miekgdns.A); !ok || !a.A.IsPrivate() {
		t.Errorf("answer %v, want the Service's ClusterIP", r.Answer[0])
	}
	for path, want := range map[string]string{"/healthz": "ok", "/metrics": `svcnet_dns_requests_total{rcode="NOERROR",type="A"}`} {
		resp, err := http.Get("http://" + metricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
}

// --upstream takes IPs and resolv.conf paths; a path gives its nameservers.
func TestExpandUpstreams(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("search example.org\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := expandUpstreams([]string{"198.51.100.1:5353", conf})
	if err != nil || strings.Join(got, ",") != "198.51.100.1:5353,192.0.2.53:53,192.0.2.54:53" {
		t.Errorf("expandUpstreams = %v, %v", got, err)
	}
	if _, err := expandUpstreams([]string{"/nonexistent/resolv.conf"}); err == nil || !strings.Contains(err.Error(), "--upstream /nonexistent/resolv.conf") {
		t.Errorf("missing file: err %v, want one naming the flag and path", err)
	}
}

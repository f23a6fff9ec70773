package resolv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Config
	}{{
		name: "lab pod",
		text: "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
		want: Config{Nameservers: []string{"10.96.0.10:53"}, Search: []string{"default.svc.cluster.local.", "svc.cluster.local.", "cluster.local."},
			Ndots: 5, Timeout: 5 * time.Second, Attempts: 2},
	}, {
		name: "empty: glibc defaults",
		text: "",
		want: DefaultConfig(),
	}, {
		name: "comments, IPv6, bad and surplus servers ignored",
		text: "# a comment\n; another\nnameserver fd00::10 # trailing\nnameserver not-an-ip\nnameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\n",
		want: Config{Nameservers: []string{"[fd00::10]:53", "10.0.0.1:53", "10.0.0.2:53"}, Ndots: 1, Timeout: 5 * time.Second, Attempts: 2},
	}, {
		name: "search then domain: the last wins",
		text: "search a.example b.example\ndomain c.example\n",
		want: Config{Nameservers: []string{"127.0.0.1:53"}, Search: []string{"c.example."}, Ndots: 1, Timeout: 5 * time.Second, Attempts: 2},
	}, {
		name: "domain then search: the last wins",
		text: "domain c.example\nsearch a.example. b.example\n",
		want: Config{Nameservers: []string{"127.0.0.1:53"}, Search: []string{"a.example.", "b.example."}, Ndots: 1, Timeout: 5 * time.Second, Attempts: 2},
	}, {
		name: "options capped, malformed ignored",
		text: "options ndots:99 timeout:100 attempts:9 edns0 use-vc rotate\noptions ndots:x timeout:0\n",
		want: Config{Nameservers: []string{"127.0.0.1:53"}, Ndots: 15, Timeout: 30 * time.Second, Attempts: 5, EDNS0: true, UseTCP: true},
	}, {
		name: "ndots 0",
		text: "options ndots:0 timeout:1 attempts:1",
		want: Config{Nameservers: []string{"127.0.0.1:53"}, Ndots: 0, Timeout: time.Second, Attempts: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("config (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	got, err := ReadConfig(filepath.Join(dir, "missing"))
	if err != nil {
		t.Fatalf("missing file: %v", err)
	}
	if d := cmp.Diff(DefaultConfig(), got); d != "" {
		t.Errorf("missing file gives (-want +got):\n%s", d)
	}
	p := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(p, []byte("nameserver 10.96.0.10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = ReadConfig(p)
	if err != nil || len(got.Nameservers) != 1 || got.Nameservers[0] != "10.96.0.10:53" {
		t.Errorf("ReadConfig = %+v, %v", got, err)
	}
	if _, err := ReadConfig(dir); err == nil {
		t.Errorf("reading a directory: no error")
	}
}

func TestCandidates(t *testing.T) {
	lab := Config{Search: []string{"default.svc.cluster.local.", "svc.cluster.local.", "cluster.local."}, Ndots: 5}
	for _, tc := range []struct {
		name string
		cfg  Config
		in   string
		want []string
	}{
		{"short name: search first", lab, "my-nginx",
			[]string{"my-nginx.default.svc.cluster.local.", "my-nginx.svc.cluster.local.", "my-nginx.cluster.local.", "my-nginx."}},
		{"four dots < ndots 5: search first", lab, "my-nginx.default.svc.cluster.local",
			[]string{"my-nginx.default.svc.cluster.local.default.svc.cluster.local.", "my-nginx.default.svc.cluster.local.svc.cluster.local.",
				"my-nginx.default.svc.cluster.local.cluster.local.", "my-nginx.default.svc.cluster.local."}},
		{"trailing dot: only itself", lab, "my-nginx.default.svc.cluster.local.", []string{"my-nginx.default.svc.cluster.local."}},
		{"dots >= ndots: as is first", Config{Search: []string{"example."}, Ndots: 1}, "a.b",
			[]string{"a.b.", "a.b.example."}},
		{"ndots 0: as is first", Config{Search: []string{"example."}, Ndots: 0}, "a",
			[]string{"a.", "a.example."}},
		{"no search list", Config{Ndots: 1}, "host", []string{"host."}},
		{"root search domain is the name itself, once", Config{Search: []string{"."}, Ndots: 1}, "host", []string{"host."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.cfg.Candidates(tc.in)); d != "" {
				t.Errorf("Candidates(%q) (-want +got):\n%s", tc.in, d)
			}
		})
	}
}

func TestUpstreamsFrom(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := UpstreamsFrom(write("ok", "# node resolvers\nsearch example.org\nnameserver 192.0.2.53\nnameserver 2001:db8::53 ; second\nnameserver bogus\n"))
	if err != nil || strings.Join(got, ",") != "192.0.2.53:53,[2001:db8::53]:53" {
		t.Errorf("UpstreamsFrom = %v, %v; want both nameservers on port 53", got, err)
	}
	if _, err := UpstreamsFrom(write("none", "search example.org\n")); err == nil || !strings.Contains(err.Error(), "no nameserver") {
		t.Errorf("a file without nameserver: err %v, want one saying so", err)
	}
	if _, err := UpstreamsFrom(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: no error")
	}
}

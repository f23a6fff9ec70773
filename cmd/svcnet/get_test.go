package main

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// run executes the svcnet command line in-process.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		errb.WriteString(err.Error())
		code = exitCode(err)
	}
	return out.String(), errb.String(), code
}

func articleCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"nodes.yaml", "my-nginx.yaml"} {
		b, err := os.ReadFile(filepath.Join("../../examples/packet-path", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var articleLine = regexp.MustCompile(`(?m)^my-nginx\s+LoadBalancer\s+(\S+)\s+<pending>\s+80:(\d+)/TCP\s+\S+\s*$`)

// The acceptance line: the `kubectl get svc` line of the article "Demystifying Kubernetes Services Packet Path", from manifests.
func TestGetServicesPacketPath(t *testing.T) {
	dir := articleCopy(t)
	out, errOut, code := run(t, "get", "services", "--state", filepath.Join(dir, "my-nginx.yaml"))
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errOut)
	}
	m := articleLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no my-nginx line like the article's in:\n%s", out)
	}
	ip, err := netip.ParseAddr(m[1])
	if err != nil || !netip.MustParsePrefix("10.96.0.0/12").Contains(ip) {
		t.Fatalf("cluster IP %q not in 10.96.0.0/12", m[1])
	}
	if np, _ := strconv.Atoi(m[2]); np < 30000 || np > 32767 {
		t.Fatalf("nodePort %s outside 30000-32767", m[2])
	}
	if !strings.HasPrefix(out, "NAME ") || !strings.Contains(out, "CLUSTER-IP") {
		t.Fatalf("no kubectl header:\n%s", out)
	}
	// Same again: allocations persisted and stable.
	out2, _, _ := run(t, "get", "services", "--state", filepath.Join(dir, "my-nginx.yaml"))
	if m2 := articleLine.FindStringSubmatch(out2); m2 == nil || m2[1] != m[1] || m2[2] != m[2] {
		t.Fatalf("second get moved my-nginx: %v then %v", m, m2)
	}
}

func TestGetReportsInvalidAndPrintsValid(t *testing.T) {
	dir := articleCopy(t)
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: broken}\nspec: {clusterIP: 10.300.0.1, ports: [{port: 80}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "get", "svc", "--state", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, part := range []string{bad, "Service default/broken", "spec.clusterIPs", "10.300.0.1"} {
		if !strings.Contains(errOut, part) {
			t.Errorf("stderr does not name %q:\n%s", part, errOut)
		}
	}
	if !articleLine.MatchString(out) || strings.Contains(out, "broken") {
		t.Fatalf("valid Services not printed, or the invalid one was:\n%s", out)
	}
}

func TestGetOtherResourcesAndFormats(t *testing.T) {
	dir := articleCopy(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", "endpointslices"}, []string{"ADDRESSTYPE", "192.168.2.2,192.168.3.2"}},
		{[]string{"get", "nodes", "-o", "wide"}, []string{"node1", "Ready", "172.26.236.177"}},
		{[]string{"get", "pods", "-o", "wide"}, []string{"my-nginx-65c68bbcdf-5vmch", "1/1", "Running", "192.168.2.2", "node2"}},
		{[]string{"get", "services", "-A"}, []string{"NAMESPACE", "default", "kubernetes", "10.96.0.1"}},
		{[]string{"get", "services", "-o", "json"}, []string{`"kind": "List"`, `"kind": "Service"`, `"nodePort":`}},
		{[]string{"get", "endpointslices", "-o", "yaml"}, []string{"kind: EndpointSlice", "kubernetes.io/service-name: my-nginx", "addressType: IPv4"}},
	} {
		out, errOut, code := run(t, append(tc.args, "--state", dir)...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", tc.args, code, errOut)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
	if _, errOut, code := run(t, "get", "deployments", "--state", dir); code == 0 || !strings.Contains(errOut, `the server doesn't have a resource type "deployments"`) {
		t.Errorf("unknown resource: exit %d, %s", code, errOut)
	}
	if _, errOut, code := run(t, "get", "svc"); code == 0 || !strings.Contains(errOut, "no source of state") {
		t.Errorf("no source: exit %d, %s", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := run(t, "version")
	if code != 0 || !regexp.MustCompile(`^svcnet \S+ \(commit \S+, go1\.\d+`).MatchString(out) {
		t.Fatalf("version: %d %q", code, out)
	}
}

// With the article's pool, my-nginx gets its EXTERNAL-IP 172.26.236.180,
// and `get ipaddresspools` lists the pool as the CRD's printer columns do.
func TestGetPacketPathWithPool(t *testing.T) {
	dir := articleCopy(t)
	b, err := os.ReadFile("../../examples/packet-path/pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pool.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "get", "svc", "--state", dir)
	if code != 0 || !regexp.MustCompile(`(?m)^my-nginx\s+LoadBalancer\s+\S+\s+172\.26\.236\.180\s+80:\d+/TCP`).MatchString(out) {
		t.Fatalf("exit %d, stderr %s; want my-nginx with EXTERNAL-IP 172.26.236.180 in:\n%s", code, errOut, out)
	}
	out, errOut, code = run(t, "get", "ipaddresspools", "--state", dir)
	if code != 0 || !regexp.MustCompile(`^NAME\s+MODE\s+ADDRESSES\s+AUTO-ASSIGN\s+AGE\nlab\s+l2\s+172\.26\.236\.180-172\.26\.236\.199\s+true\s+\S+\n$`).MatchString(out) {
		t.Fatalf("exit %d, stderr %s; want the lab pool in:\n%s", code, errOut, out)
	}
}

package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/testbin"
)

// Bounds of the CLI commands the test runs.
const (
	cliUpTimeout    = 10 * time.Minute
	cliApplyTimeout = 3 * time.Minute
	cliTimeout      = time.Minute
	// readyTimeout bounds the wait for what follows an apply: a headless
	// pod's hostname record (from its EndpointSlice, which the DNS pod reads)
	// and a Service's endpoints programmed by the proxies.
	readyTimeout = 60 * time.Second
)

// Every lab subcommand, run as a user runs it (svcnet's CLI as a process, in
// a namespace standing for the host's: see standInHost), with names to
// resolve: names resolve in the lab as the place sending resolves them (a
// headless Service's pod by hostname, a Service by short name and FQDN, from
// a pod and from a node), a name the cluster DNS does not know and a name
// from the external client are errors naming the name, the place and the
// resolver, and no command (nor svcnet demo, on the file control plane)
// sends a packet from the CLI's namespace except to loopback (nor any DNS
// query, even to loopback).
func TestLabStaysInLabFileControlPlane(t *testing.T) { labStaysInLab(t, cluster.ControlPlaneFile) }

func TestLabStaysInLabKubeControlPlane(t *testing.T) {
	requireKubeTier(t)
	labStaysInLab(t, cluster.ControlPlaneKube)
}

var answeredByRE = regexp.MustCompile(`answered by pod (\S+) \((\S+) on (\S+)\)`)

func labStaysInLab(t *testing.T, controlPlane string) {
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	host := newStandInHost(t)
	name := labtest.Name("names") + "-" + controlPlane
	t.Cleanup(func() {
		if err := lab.Down(name); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	defer host.checkNothingSent()
	run := func(t *testing.T, timeout time.Duration, args ...string) cliResult {
		t.Helper()
		return host.svcnet(t, ctx, timeout, append([]string{"lab", "--name", name}, args...)...)
	}
	must := func(timeout time.Duration, args ...string) cliResult {
		t.Helper()
		r := run(t, timeout, args...)
		if r.code != 0 {
			t.Fatalf("svcnet lab %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}

	up := []string{"up", "--nodes", "2"}
	if controlPlane == cluster.ControlPlaneKube {
		up = append(up, "--control-plane", cluster.ControlPlaneKube, "--k8s-bin", os.Getenv(kubetest.EnvK8sBin))
	}
	must(cliUpTimeout, up...)
	fixture, err := filepath.Abs("names.yaml")
	if err != nil {
		t.Fatal(err)
	}
	must(cliApplyTimeout, "apply", "-f", fixture)
	for res, want := range map[string]string{"svc": "nginx-hl", "pods": "web-0", "nodes": "node2", "endpointslices": "nginx-hl"} {
		if r := must(cliTimeout, "get", res); !strings.Contains(r.stdout, want) {
			t.Errorf("lab get %s does not list %s:\n%s", res, want, r.stdout)
		}
	}

	// The headless pod by hostname from a pod: the pod's search path
	// (default.svc.cluster.local first, ndots:5) at the cluster DNS, once
	// the DNS pod has the EndpointSlice; and the Service by its short name,
	// once client-0's node has programmed both endpoints.
	var web0IP string
	waitFor := func(what string, ok func(r cliResult) bool, args ...string) {
		t.Helper()
		deadline := time.Now().Add(readyTimeout)
		for {
			r := run(t, cliTimeout, args...)
			if ok(r) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: %s", what, readyTimeout, r)
			}
			time.Sleep(time.Second)
		}
	}
	waitFor("web-0.nginx-hl answered by web-0", func(r cliResult) bool {
		m := answeredByRE.FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil || m[1] != "web-0" {
			return false
		}
		web0IP = m[2]
		return true
	}, "curl", "client-0", "web-0.nginx-hl")
	waitFor("nginx answered by both pods", func(r cliResult) bool {
		return r.code == 0 && strings.Contains(r.stdout, "web-0 on node1") && strings.Contains(r.stdout, "web-1 on node2")
	}, "curl", "client-0", "nginx", "-c", "10")

	answeredBy := func(t *testing.T, r cliResult, pods ...string) {
		t.Helper()
		ms := answeredByRE.FindAllStringSubmatch(r.stdout, -1)
		if r.code != 0 || len(ms) == 0 {
			t.Fatalf("not answered: %s", r)
		}
		for _, m := range ms {
			if !strings.Contains(" "+strings.Join(pods, " ")+" ", " "+m[1]+" ") {
				t.Errorf("answered by %s, want one of %v", m[1], pods)
			}
		}
	}
	t.Run("ServiceShortNameFromPod", func(t *testing.T) {
		r := run(t, cliTimeout, "curl", "client-0", "nginx", "-c", "4")
		answeredBy(t, r, "web-0", "web-1")
		if !strings.Contains(r.stdout, "4 requests: 4 answered, 0 failed") {
			t.Errorf("want 4 answered: %s", r.stdout)
		}
	})
	t.Run("UDPFromPod", func(t *testing.T) {
		// One datagram per request from a new socket: the echo servers
		// answer whoami as GET / is answered.
		r := run(t, cliTimeout, "curl", "client-0", "udp://nginx:5353", "-c", "4")
		answeredBy(t, r, "web-0", "web-1")
		if !strings.Contains(r.stdout, "UDP udp://nginx:5353: answered by pod ") || !strings.Contains(r.stdout, "4 requests: 4 answered, 0 failed") {
			t.Errorf("want 4 UDP requests answered: %s", r.stdout)
		}
	})
	t.Run("RefusedSaysWhyAndHowToTrace", func(t *testing.T) {
		// A Service without endpoints refuses on every plane; the hint is a
		// lab trace that runs as printed and agrees with the kernel.
		r := run(t, cliTimeout, "curl", "client-0", "svc/empty")
		m := regexp.MustCompile(`to see where the packet went and why: svcnet lab trace --name \S+ (client-0) (\S+) --verify`).FindStringSubmatch(r.stdout)
		if r.code != 1 || !strings.Contains(r.stdout, "connection refused") || m == nil {
			t.Fatalf("want exit 1, connection refused and a lab trace to run: %s", r)
		}
		tr := run(t, cliTimeout, "trace", m[1], m[2], "--verify")
		if tr.code != 0 || !strings.Contains(tr.stdout, "rejected") || !strings.Contains(tr.stdout, "default/empty") {
			t.Errorf("the hinted lab trace: want it rejected at Service default/empty, the kernel agreeing: %s", tr)
		}
	})
	t.Run("ServiceFQDNFromPod", func(t *testing.T) {
		answeredBy(t, run(t, cliTimeout, "curl", "client-0", "nginx.default.svc.cluster.local:80"), "web-0", "web-1")
	})
	t.Run("HeadlessHostnameFromNode", func(t *testing.T) {
		// A node's resolv.conf: the cluster DNS through its own proxy.
		answeredBy(t, run(t, cliTimeout, "curl", "node1", "web-1.nginx-hl"), "web-1")
	})
	t.Run("UnknownNameIsNXDOMAIN", func(t *testing.T) {
		r := run(t, cliTimeout, "curl", "client-0", "nosuch")
		for _, want := range []string{`resolve "nosuch" from pod default/client-0`, "resolver: 10.96.0.10:53, search default.svc.cluster.local",
			"nosuch.default.svc.cluster.local. (NXDOMAIN)"} {
			if r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("want exit 1 saying %q: %s", want, r)
			}
		}
		if strings.Contains(r.stdout, "answered") {
			t.Errorf("a request was sent: %s", r.stdout)
		}
	})
	t.Run("ClientRefusesNames", func(t *testing.T) {
		r := run(t, cliTimeout, "curl", "client", "nginx")
		if r.code != 1 || !strings.Contains(r.stderr, `resolve "nginx" from the client (resolver: none)`) || !strings.Contains(r.stderr, "outside the cluster") {
			t.Errorf("want exit 1: the client has no resolver: %s", r)
		}
	})
	t.Run("ExecInPod", func(t *testing.T) {
		r := run(t, cliTimeout, "exec", "client-0", "--", svcnetBin, "resolve", "web-0.nginx-hl")
		if r.code != 0 || strings.TrimSpace(r.stdout) != web0IP {
			t.Errorf("lab exec client-0 -- svcnet resolve web-0.nginx-hl: want %s: %s", web0IP, r)
		}
	})
	t.Run("TraceVerify", func(t *testing.T) {
		if r := run(t, cliTimeout, "trace", "client-0", "default/nginx:80", "--verify"); r.code != 0 {
			t.Errorf("lab trace: %s", r)
		}
	})
	t.Run("GetAsKubectl", func(t *testing.T) {
		// kubectl's argument forms, selectors and -o forms over the lab
		// (test/kube holds them to real kubectl byte for byte).
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"get", "svc", "nginx", "-o", "name"}, "service/nginx\n"},
			{[]string{"get", "pods", "-l", "app in (nginx)", "-o", "name"}, "pod/web-0\npod/web-1\n"},
			{[]string{"get", "svc/nginx", "pod/client-0", "-o", "name"}, "service/nginx\npod/client-0\n"},
			{[]string{"get", "svc", "nginx", "-o", "jsonpath={.spec.ports[*].name}"}, "http echo-udp"},
			{[]string{"get", "pods", "--field-selector", "metadata.name=web-0", "-o", "custom-columns=NODE:.spec.nodeName", "--no-headers"}, "node1\n"},
		} {
			if r := run(t, cliTimeout, c.args...); r.code != 0 || r.stdout != c.want {
				t.Errorf("lab %s: want %q: %s", strings.Join(c.args, " "), c.want, r)
			}
		}
		if r := run(t, cliTimeout, "get", "all"); r.code != 0 || !strings.Contains(r.stdout, "pod/web-0 ") || !strings.Contains(r.stdout, "service/nginx ") {
			t.Errorf("lab get all: want pods and services named KIND/NAME: %s", r)
		}
		if r := run(t, cliTimeout, "get", "ep", "nginx"); r.code != 0 || !regexp.MustCompile(`(?m)^nginx\s+\S+:(80|5353),`).MatchString(r.stdout) {
			t.Errorf("lab get ep nginx: want its pods' addresses: %s", r)
		}
		if r := run(t, cliTimeout, "get", "svc", "nope"); r.code != 1 || !strings.Contains(r.stderr, `Error from server (NotFound): services "nope" not found`) {
			t.Errorf("lab get svc nope: want kubectl's NotFound: %s", r)
		}
	})
	t.Run("ShellCompletion", func(t *testing.T) {
		// What a user's TAB offers, in each shell svcnet completes for:
		// resource types, the lab's name, its places, its objects.
		for _, sh := range []string{"bash", "fish", "zsh"} {
			shellCompletes(t, ctx, host.ns.Name(), sh, "svcnet lab get ", "endpoints", "endpointslices", "events", "ipaddresspools", "nodes", "pods", "services")
			shellCompletes(t, ctx, host.ns.Name(), sh, "svcnet lab --name "+name+" curl w", "web-0", "web-1")
		}
		shellCompletes(t, ctx, host.ns.Name(), "zsh", "svcnet lab --name "+name+" exec ", "client", "node1", "node2", "client-0", "web-0", "web-1")
		shellCompletes(t, ctx, host.ns.Name(), "bash", "svcnet lab --name "+name[:len(name)-1], name)
		shellCompletes(t, ctx, host.ns.Name(), "bash", "svcnet lab --name "+name+" trace client-0 default/ngi", "default/nginx", "default/nginx-hl")
		shellCompletes(t, ctx, host.ns.Name(), "bash", "svcnet lab --name "+name+" curl client-0 svc/ngi", "svc/nginx", "svc/nginx-hl")
		shellCompletes(t, ctx, host.ns.Name(), "fish", "svcnet lab --name "+name+" delete service ", "empty", "kubernetes", "nginx", "nginx-hl")
		shellCompletes(t, ctx, host.ns.Name(), "fish", "svcnet lab --name "+name+" delete pod -n default w", "web-0", "web-1")
		shellCompletes(t, ctx, host.ns.Name(), "bash", "svcnet lab --name "+name+" get pods web-0 w", "web-1")
	})
	t.Run("GetWatch", func(t *testing.T) {
		// lab get -w: the table, then a row for a Service deleted
		// meanwhile; an interrupt ends it with status 0.
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := netns.CommandNetIn(wctx, host.ns.Name(), svcnetBin, "lab", "--name", name, "get", "svc", "-w")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 64)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		await := func(what string, match func(string) bool) {
			t.Helper()
			timeout := time.After(20 * time.Second)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("lab get -w ended before %s", what)
					}
					if match(l) {
						return
					}
				case <-timeout:
					t.Fatalf("lab get -w: no %s within 20s", what)
				}
			}
		}
		await("row of nginx", func(l string) bool { return strings.HasPrefix(l, "nginx ") })
		must(cliTimeout, "delete", "svc", "empty")
		await("row of the deleted Service empty", func(l string) bool { return strings.HasPrefix(l, "empty ") })
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("lab get -w after an interrupt: %v; want status 0", err)
		}
	})
	must(cliTimeout, "delete", "pod", "web-1", "--grace-period", "1s")
	must(cliTimeout, "delete", "svc", "nginx")
	must(cliTimeout, "down")

	if controlPlane != cluster.ControlPlaneFile {
		return
	}
	// svcnet demo: its own 3-node lab, every step checked, on the data
	// plane under test (each plane's demo has steps of its own).
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	demo := labtest.Name("namesdemo")
	t.Cleanup(func() {
		if err := lab.Down(demo); err != nil {
			t.Errorf("lab down %s: %v", demo, err)
		}
	})
	args := append([]string{"demo", "--name", demo, "--svg", "", "-f", filepath.Join(root, "examples/packet-path/my-nginx.yaml")}, testbin.DataPlaneArgs()...)
	if r := host.svcnet(t, ctx, cliUpTimeout, args...); r.code != 0 {
		t.Errorf("svcnet demo: exit %d: %s", r.code, r.stderr)
	}
}

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// resolveTimeout bounds one `svcnet resolve` (its resolver tries every search
// domain, each query bounded by resolv.conf's timeout).
const resolveTimeout = 30 * time.Second

// resolved is what one `svcnet resolve` printed and how it ended.
type resolved struct {
	lines  []string // stdout: one record per line
	stderr string
	code   int // exit status
}

// resolve runs `svcnet resolve ARGS` in the pod's network namespace through
// `ip netns exec`, so it reads the pod's resolv.conf (nameserver 10.96.0.10,
// the pod's search list, ndots:5) and its queries cross the node's proxy like
// a real pod's.
// It fails t when the command cannot run at all.
func (e *env) resolve(t *testing.T, from string, args ...string) resolved {
	t.Helper()
	p, err := e.l.Resolve(e.ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, resolveTimeout)
	defer cancel()
	cmd := e.l.CommandContext(ctx, p, append([]string{svcnetBin, "resolve"}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("from %s: svcnet resolve %q: %v", from, args, err)
	}
	r := resolved{stderr: stderr.String()}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			r.lines = append(r.lines, l)
		}
	}
	if ee != nil {
		r.code = ee.ExitCode()
	}
	return r
}

// serviceIn returns the Service namespace/name as the control plane holds it.
func (e *env) serviceIn(namespace, name string) *corev1.Service {
	e.t.Helper()
	r, err := e.l.Get(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range r.Services {
		if s.Namespace == namespace && s.Name == name {
			return s
		}
	}
	e.t.Fatalf("Service %s/%s not found", namespace, name)
	return nil
}

// dnsScenarios: pods resolve names through the lab's cluster DNS (svcnet dns
// in kube-system/svcnet-dns behind kube-dns at 10.96.0.10) as the Kubernetes
// DNS specification says, by short name, FQDN, namespace-qualified name,
// ExternalName, headless Service and its hostnames, and SRV; from pods on the
// DNS pod's node and on others, so queries cross the ClusterIP DNAT and the
// node network.
func dnsScenarios(t *testing.T, e *env) {
	web := e.service("web").Spec.ClusterIP
	api := e.serviceIn("other", "api").Spec.ClusterIP
	db0, db1 := e.pod("db-0").Status.PodIP, e.pod("db-1").Status.PodIP
	// Headless endpoints and per-hostname records come from EndpointSlices,
	// which a kube control plane writes after the pods report ready.
	eventually(t, "headless db resolves to both pods", func() error {
		return sameLines(e.resolve(t, "client-1", "db"), db0, db1)
	})

	for _, tc := range []struct {
		name, from string
		args       []string
		want       []string // the records printed, in any order
	}{
		{"ShortName", "client-1", []string{"web"}, []string{web}},
		{"ShortNameFromAnotherNode", "client-3", []string{"web"}, []string{web}},
		{"FQDN", "client-3", []string{"web.default.svc.cluster.local"}, []string{web}},
		{"FQDNTrailingDot", "client-1", []string{"web.default.svc.cluster.local."}, []string{web}},
		{"CaseInsensitive", "client-1", []string{"WEB.Default.svc.cluster.local"}, []string{web}},
		{"OtherNamespace", "client-1", []string{"api.other"}, []string{api}},
		{"OwnNamespaceFirst", "other/api-1", []string{"api"}, []string{api}},
		{"ExternalNameCNAME", "client-1", []string{"ext"}, []string{"www.example.com."}},
		{"ExternalNameCNAMEType", "client-3", []string{"-t", "CNAME", "ext.default.svc.cluster.local"}, []string{"www.example.com."}},
		{"Headless", "client-3", []string{"db"}, []string{db0, db1}},
		{"HeadlessHostname", "client-1", []string{"db-0.db"}, []string{db0}},
		{"HeadlessHostnameFQDN", "client-3", []string{"db-1.db.default.svc.cluster.local"}, []string{db1}},
		{"SRVClusterIP", "client-1", []string{"-t", "SRV", "_http._tcp.web"}, []string{"0 100 80 web.default.svc.cluster.local."}},
		{"SRVHeadless", "client-3", []string{"-t", "SRV", "_http._tcp.db.default.svc.cluster.local"},
			[]string{"0 50 80 db-0.db.default.svc.cluster.local.", "0 50 80 db-1.db.default.svc.cluster.local."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.resolve(t, tc.from, tc.args...)
			if r.code != 0 {
				t.Fatalf("from %s: svcnet resolve %q: exit %d: %s", tc.from, tc.args, r.code, r.stderr)
			}
			if err := sameLines(r, tc.want...); err != nil {
				t.Fatalf("from %s: svcnet resolve %q: %v", tc.from, tc.args, err)
			}
		})
	}

	t.Run("UnknownNameNXDOMAIN", func(t *testing.T) {
		const name = "nosuch.default.svc.cluster.local."
		r := e.resolve(t, "client-1", name)
		if r.code != 1 || len(r.lines) > 0 || !strings.Contains(r.stderr, name+" (NXDOMAIN)") {
			t.Fatalf("svcnet resolve %s: exit %d, printed %q, stderr %q; want exit 1 naming %s (NXDOMAIN)", name, r.code, r.lines, r.stderr, name)
		}
	})
	t.Run("ShortNameIsPerNamespace", func(t *testing.T) {
		// From namespace other, "web" is searched as web.other.svc.cluster.local
		// (NXDOMAIN) and then as names no Service has.
		r := e.resolve(t, "other/api-1", "web")
		if r.code != 1 || !strings.Contains(r.stderr, "web.other.svc.cluster.local. (NXDOMAIN)") {
			t.Fatalf("svcnet resolve web from namespace other: exit %d, printed %q, stderr %q; want exit 1 with web.other.svc.cluster.local. (NXDOMAIN)", r.code, r.lines, r.stderr)
		}
	})
	t.Run("NewServiceResolves", func(t *testing.T) {
		svc := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "default"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
		}
		e.applyObjects(controlplane.Object{Origin: "dns_test", Obj: svc})
		ip := e.service("late").Spec.ClusterIP
		eventually(t, "late resolves", func() error { return sameLines(e.resolve(t, "client-3", "late"), ip) })
	})
	t.Run("LabExecCLI", func(t *testing.T) { labExecResolve(t, e, web) })
}

// labExecResolve runs `svcnet lab exec client-1 -- svcnet resolve web` as a user does, through
// the binary: `svcnet lab exec client-1 -- svcnet resolve web` prints web's
// ClusterIP. The CLI takes the lab's lock, so the suite's handle lets go of
// it meanwhile.
func labExecResolve(t *testing.T, e *env, want string) {
	name, reopen := e.release(t)
	defer reopen()
	ctx, cancel := context.WithTimeout(e.ctx, resolveTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, svcnetBin, "lab", "exec", "--name", name, "client-1", "--", svcnetBin, "resolve", "web").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("svcnet lab exec client-1 -- svcnet resolve web: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("svcnet lab exec client-1 -- svcnet resolve web: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("svcnet lab exec client-1 -- svcnet resolve web printed %q, want %q", got, want)
	}
}

// eventually is env.eventually failing t (a subtest) rather than the suite:
// it retries fn every 100 ms until it succeeds or 30 s pass.
func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 30s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sameLines checks that r succeeded and printed exactly want, in any order.
func sameLines(r resolved, want ...string) error {
	if r.code != 0 {
		return fmt.Errorf("exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	}
	got := slices.Sorted(slices.Values(r.lines))
	if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
		return fmt.Errorf("printed %q, want %q", got, w)
	}
	return nil
}

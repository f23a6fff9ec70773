package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/lab/cluster"
)

// whyPending asks for an address outside the lab's pools, so svcnet lb
// leaves it pending; whyEmpty selects no Pod.
const whyManifest = `apiVersion: v1
kind: Service
metadata:
  name: why-pending
  annotations: {svcnet.io/loadBalancerIPs: 172.26.236.250}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: why-empty}
spec:
  selector: {app: nobody}
  ports: [{port: 80, targetPort: 80}]
`

// whyScenarios: why, not only what. `lab apply` of a LoadBalancer Service
// svcnet lb cannot serve and of a Service without endpoints is accepted
// with a warning line for each, naming the reason; `lab describe svc`
// shows svcnet lb's events (AllocationFailed with the reason; IPAllocated
// with the address and pool for web-lb) as kubectl describe shows them,
// and `lab get events` lists them; `lab describe pod` and `lab describe
// node` describe the lab's own objects, and an unknown name is kubectl's
// NotFound.
func whyScenarios(t *testing.T, e *env) {
	manifest := filepath.Join(t.TempDir(), "why.yaml")
	if err := os.WriteFile(manifest, []byte(whyManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{"why-pending", "why-empty"} {
			if err := e.l.Delete(e.ctx, "Service", "default", name, 0); err != nil {
				t.Errorf("delete Service %s: %v", name, err)
			}
		}
	})
	const reason = "requested IP 172.26.236.250 is in no IPAddressPool"
	stdout, stderr, code := e.labCLI(t, "apply", "-f", manifest)
	if code != 0 {
		t.Fatalf("lab apply: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Warning: Service default/why-pending: LoadBalancer address <pending>: ",
		reason,
		"Warning: Service default/why-empty: no endpoints: no ready Pod matches its selector app=nobody",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("lab apply's stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Count(stderr, "Warning:") != 2 {
		t.Errorf("lab apply: want 2 warnings, got:\n%s", stderr)
	}
	if cp := e.l.Info().ControlPlane; cp == cluster.ControlPlaneFile || cp == "" {
		// The embedded control plane's daemon made the change and decided
		// the warnings (lab apply makes them itself only without one).
		log, err := os.ReadFile(e.l.Names().Path("logs", "control-plane.log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{"apply", "notServed"} {
			if !strings.Contains(string(log), `"Control-plane request" logger="control-plane" op="`+op+`" objects=2 errors=0`) {
				t.Errorf("the control-plane daemon served no %s of the 2 objects:\n%s", op, log)
			}
		}
	}

	events := regexp.MustCompile(`(?m)^Events:\n  Type +Reason +Age +From +Message\n  ----.*\n`)
	row := func(typ, reason, msg string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^  ` + typ + ` +` + reason + ` +\S+( \(x\d+ over \S+\))? +svcnet-lb-controller +` + regexp.QuoteMeta(msg))
	}
	describe := func(args ...string) string {
		t.Helper()
		out, errOut, code := e.labCLI(t, append([]string{"describe"}, args...)...)
		if code != 0 {
			t.Fatalf("lab describe %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	// field matches a description's line "KEY:   VALUE..." (the padding is
	// the block's).
	field := func(text, key, value string) bool {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `: +` + regexp.QuoteMeta(value)).MatchString(text)
	}
	pending := describe("svc", "why-pending")
	for _, f := range [][2]string{{"Name", "why-pending\n"}, {"Type", "LoadBalancer\n"},
		{"Annotations", "svcnet.io/loadBalancerIPs: 172.26.236.250\n"}, {"Endpoints", ""}} {
		if !field(pending, f[0], f[1]) {
			t.Errorf("lab describe svc why-pending lacks %s: %q:\n%s", f[0], f[1], pending)
		}
	}
	if !events.MatchString(pending) || !row("Warning", "AllocationFailed", reason).MatchString(pending) {
		t.Errorf("lab describe svc why-pending: no AllocationFailed event with %q:\n%s", reason, pending)
	}
	ip := e.lbIP("web-lb")
	lb := describe("svc/web-lb")
	if !field(lb, "LoadBalancer Ingress", ip.String()) ||
		!row("Normal", "IPAllocated", fmt.Sprintf("Assigned IP %s from pool lab", ip)).MatchString(lb) {
		t.Errorf("lab describe svc/web-lb: want its ingress %s and an IPAllocated event:\n%s", ip, lb)
	}

	out, errOut, code := e.labCLI(t, "get", "events")
	if code != 0 || !regexp.MustCompile(`(?m)^\S+ +Warning +AllocationFailed +service/why-pending +`).MatchString(out) {
		t.Errorf("lab get events: exit %d, want an AllocationFailed row for service/why-pending:\n%s%s", code, out, errOut)
	}

	pod := describe("pod", "web-1")
	for _, f := range [][2]string{{"Name", "web-1\n"}, {"Namespace", "default\n"}, {"Status", "Running\n"}, {"Node", "node1/"}} {
		if !field(pod, f[0], f[1]) {
			t.Errorf("lab describe pod web-1 lacks %s: %q:\n%s", f[0], f[1], pod)
		}
	}
	node := describe("node", "node1")
	for _, f := range [][2]string{{"Name", "node1\n"}, {"  InternalIP", "172.26.236.177\n"}} {
		if !field(node, f[0], f[1]) || !strings.Contains(node, "\nNon-terminated Pods:") {
			t.Errorf("lab describe node node1 lacks %s: %q or its pods:\n%s", f[0], f[1], node)
		}
	}
	if _, errOut, code := e.labCLI(t, "describe", "svc", "nope"); code == 0 || !strings.Contains(errOut, `Error from server (NotFound): services "nope" not found`) {
		t.Errorf("lab describe svc nope: exit %d, stderr %q; want kubectl's NotFound", code, errOut)
	}
	skippedByProxies(t, e)
}

// skippedByProxies: a Service whose externalIP is web's ClusterIP on the
// same port is accepted by the control plane, but no node can serve it
// (the address and port are web's): every node's svcnet proxy records a
// ServiceSkipped event on it, naming itself and the conflict, which `lab
// describe` shows (in file mode too, from the proxies' event files), and
// `lab apply` of it again warns that svcnet proxy does not serve it.
func skippedByProxies(t *testing.T, e *env) {
	web := e.service("web")
	manifest := filepath.Join(t.TempDir(), "why-skipped.yaml")
	doc := fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: why-skipped}\nspec:\n  selector: {app: web}\n"+
		"  externalIPs: [%s]\n  ports: [{port: %d, targetPort: 80}]\n", web.Spec.ClusterIP, web.Spec.Ports[0].Port)
	if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.l.Delete(e.ctx, "Service", "default", "why-skipped", 0); err != nil {
			t.Errorf("delete Service why-skipped: %v", err)
		}
	})
	if out, errOut, code := e.labCLI(t, "apply", "-f", manifest); code != 0 {
		t.Fatalf("lab apply: exit %d\n%s%s", code, out, errOut)
	}
	conflict := fmt.Sprintf("ExternalIP %s:%d/TCP already claimed as ClusterIP by default/web", web.Spec.ClusterIP, web.Spec.Ports[0].Port)
	nodes := e.l.Info().Nodes
	e.eventually("every node's proxy reports why-skipped", func() error {
		out, errOut, code := e.labCLI(t, "describe", "svc", "why-skipped")
		if code != 0 {
			return fmt.Errorf("lab describe: exit %d: %s", code, errOut)
		}
		for i := 1; i <= nodes; i++ {
			row := regexp.MustCompile(`(?m)^  Warning +ServiceSkipped +\S+ +svcnet-proxy +.*not served on node node` + fmt.Sprint(i) + `: ` + regexp.QuoteMeta(conflict))
			if !row.MatchString(out) {
				return fmt.Errorf("no ServiceSkipped event from node%d:\n%s", i, out)
			}
		}
		return nil
	})
	_, errOut, code := e.labCLI(t, "apply", "-f", manifest)
	if want := "Warning: Service default/why-skipped: not served by svcnet proxy: "; code != 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, conflict) {
		t.Errorf("lab apply again: exit %d, stderr lacks %q ... %q:\n%s", code, want, conflict, errOut)
	}
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/trace"
)

// traceScenarios runs svcnet trace --verify over the lab: for each scenario
// a real probe crosses the lab with nftrace set, and the kernel's own trace
// must show the chains, rules and verdicts the tracer simulated, on every
// node the packet and its reply cross; the verdict must be the expected one.
func traceScenarios(t *testing.T, e *env) {
	np := func(name string) int32 { return e.service(name).Spec.Ports[0].NodePort }
	web := e.service("web")
	for _, tc := range []struct {
		name, from, to, proto string
		want                  trace.VerdictKind
		rewrites              int // on the way in; -1: not checked
		clientKept            bool
	}{
		{"ClusterIP from a pod, endpoint anywhere", "client-1", "default/web", "", trace.Delivered, -1, false},
		{"ClusterIP from a pod on another node", "client-3", "default/solo", "", trace.Delivered, 1, true},
		{"ClusterIP from a pod on the endpoint's node", "local-2", "default/solo", "", trace.Delivered, 1, true},
		{"ClusterIP from a node", "node3", "default/solo", "", trace.Delivered, -1, false},
		{"NodePort, node with an endpoint, Cluster", "client", fmt.Sprintf("node2:%d", np("solo-np")), "", trace.Delivered, 2, false},
		{"NodePort, node without endpoint, Cluster", "client", fmt.Sprintf("node1:%d", np("solo-np")), "", trace.Delivered, 2, false},
		{"NodePort, node with an endpoint, Local", "client", fmt.Sprintf("node2:%d", np("local-etp")), "", trace.Delivered, 1, true},
		{"NodePort, node without endpoint, Local", "client", fmt.Sprintf("node1:%d", np("local-etp")), "", trace.Dropped, 0, false},
		{"NodePort on every node's pods", "client", fmt.Sprintf("node3:%d", np("web-np")), "", trace.Delivered, 2, false},
		{"externalIP from a pod (ETP Cluster: masqueraded)", "client-1", "203.0.113.10:80", "", trace.Delivered, 2, false},
		{"hairpin: the endpoint to its own Service", "solo", "default/solo", "", trace.Delivered, 2, false},
		{"no endpoints: rejected", "client-1", "default/empty", "", trace.Rejected, 0, false},
		{"unknown port of a ClusterIP: rejected", "client-1", web.Spec.ClusterIP + ":81", "", trace.Rejected, 0, false},
		{"internalTrafficPolicy Local without local endpoint: dropped", "client-1", "default/local-itp", "", trace.Dropped, 0, false},
		{"session affinity", "client-1", "default/web-sticky", "", trace.Delivered, -1, false},
		{"UDP to a ClusterIP", "client-1", "default/dns:dns-udp", "", trace.Delivered, -1, false},
		{"pod to pod on another node", "client-1", "default/web-2:80", "", trace.Delivered, 0, true},
		{"LoadBalancer IP from the client, to its ARP owner", "client", "default/web-lb", "", trace.Delivered, 2, false},
		{"LoadBalancer IP, Local: the owner has the endpoint", "client", "default/local-etp", "", trace.Delivered, 1, true},
		{"LoadBalancer IP outside loadBalancerSourceRanges: filtered", "client", "default/web-lb-ranges", "", trace.Filtered, 0, false},
	} {
		// kube-proxy's iptables mode does not reject unknown ports of a
		// ClusterIP: the packet leaves by the node's default route, where
		// the tracer does not follow it, egress-masqueraded unless the
		// proxies know the Service network (on kube they do not).
		leaves := false
		if e.l.Info().DataPlane == iptablesPlane && tc.to == web.Spec.ClusterIP+":81" {
			tc.name, tc.want, tc.rewrites, leaves = "unknown port of a ClusterIP: not rejected by iptables, leaves", trace.Delivered, -1, true
		}
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			tr, out := verifyTrace(t, e, trace.Ask{From: tc.from, To: tc.to, Proto: tc.proto})
			if leaves && !strings.Contains(tr.Verdict.Reason, "out of the cluster") {
				t.Errorf("verdict %s (%s), want the packet to leave the cluster\n%s", tr.Verdict.Kind, tr.Verdict.Reason, out)
			}
			if req := tr.Request; !req.EphemeralPort || req.EphemeralNetNS == "" {
				t.Errorf("source port %d: ephemeral %v, picked in netns %q; want one the sender's kernel picked and held for the probe", req.Packet.Src.Port(), req.EphemeralPort, req.EphemeralNetNS)
			}
			if w := fmt.Sprintf("source port %d is ephemeral: picked by the kernel of netns %s", tr.Request.Packet.Src.Port(), tr.Request.EphemeralNetNS); !strings.Contains(out, w) {
				t.Errorf("the text lacks %q\n%s", w, out)
			}
			if tr.Verdict.Kind != tc.want {
				t.Fatalf("verdict %s (%s), want %s\n%s", tr.Verdict.Kind, tr.Verdict.Reason, tc.want, out)
			}
			if tc.rewrites >= 0 && tr.Summary.Rewrites != tc.rewrites {
				t.Errorf("%d rewrites on the way in, want %d\n%s", tr.Summary.Rewrites, tc.rewrites, out)
			}
			if tc.want == trace.Delivered && !leaves {
				if len(tr.Reply) == 0 {
					t.Errorf("no reply path\n%s", out)
				}
				last := tr.Hops[len(tr.Hops)-1]
				if kept := last.Arrive.Src.Addr() == tr.Request.Packet.Src.Addr(); kept != tc.clientKept && tc.rewrites >= 0 {
					t.Errorf("client address kept at the receiver: %v, want %v\n%s", kept, tc.clientKept, out)
				}
			}
		})
	}
}

// verifyTrace traces ask over the lab and checks it against the kernel's own
// trace of a real probe (trace.Verify): a disagreement fails t. It returns
// the trace and its text (the trace, then the comparison) for the caller's
// checks and messages.
func verifyTrace(t *testing.T, e *env, ask trace.Ask) (*trace.Trace, string) {
	t.Helper()
	snap, tnet, err := e.l.TraceNetwork(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := trace.Verify(e.ctx, snap, tnet, ask, e.l.TraceOptions())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_ = trace.WriteText(&out, rep.Trace)
	_ = rep.Write(&out)
	if !rep.OK() {
		t.Fatalf("the kernel disagrees: %v\n%s", rep.Differences, out.String())
	}
	return rep.Trace, out.String()
}

// labTraceVerify runs `svcnet lab trace --name name from to --verify` as a
// user does, through the binary (the caller has released the lab's lock,
// env.release), and fails t unless the kernel agreed and the output holds
// each of wants. It returns the output.
func labTraceVerify(t *testing.T, e *env, name, from, to string, wants ...string) string {
	t.Helper()
	out, err := exec.CommandContext(e.ctx, svcnetBin, "lab", "trace", "--name", name, from, to, "--verify").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "verify: the kernel took the same chains, rules and rewrites") {
		t.Fatalf("svcnet lab trace %s %s --verify: %v\n%s", from, to, err, out)
	}
	for _, want := range wants {
		if !strings.Contains(string(out), want) {
			t.Errorf("lab trace output lacks %q:\n%s", want, out)
		}
	}
	return string(out)
}

// traceCommand runs the acceptance commands as a
// user runs them, through the binary: `svcnet lab trace client SERVICE
// --verify` passes, and `-o svg` gives an SVG that renders. The CLI takes the
// lab's lock, so the suite's handle lets go of it meanwhile.
func traceCommand(t *testing.T, e *env) {
	name, reopen := e.release(t)
	defer reopen()
	// The endpoint choice names the Service port as the plane's rules do:
	// kube-proxy's comments name it "ns/name" (the port is unnamed).
	endpoint := "endpoint  default/web-np:80/tcp"
	if e.l.Info().DataPlane == iptablesPlane {
		endpoint = "endpoint  default/web-np, cluster endpoints"
	}
	labTraceVerify(t, e, name, "client", "default/web-np",
		"(Service default/web-np, NodePort)", "DNAT ", endpoint, "un-DNAT", "summary: 2 rewrites")
	svg, err := exec.CommandContext(e.ctx, svcnetBin, "lab", "trace", "--name", name, "client", "default/web-np", "-o", "svg").Output()
	if err != nil {
		t.Fatalf("svcnet lab trace -o svg: %v", err)
	}
	png := filepath.Join(t.TempDir(), "trace.png")
	svgFile := filepath.Join(t.TempDir(), "trace.svg")
	if err := os.WriteFile(svgFile, svg, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(e.ctx, "rsvg-convert", "-o", png, svgFile).CombinedOutput(); err != nil {
		t.Fatalf("rsvg-convert: %v\n%s", err, out)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 10000 {
		t.Fatalf("rendered PNG: %v, %d bytes", err, st.Size())
	}
}

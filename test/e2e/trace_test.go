package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/trace"
)

// traceScenarios runs svcnet trace --verify over the lab: for each scenario
// a real probe crosses the lab with nftrace set, and the kernel's own trace
// must show the chains, rules and verdicts the tracer simulated, on every
// node the packet and its reply cross; the verdict must be the expected one.
//
// The expectations are the kernel planes' (a DNAT to a pod, masquerading by
// externalTrafficPolicy). On the userspace plane a connection to a Service
// has two legs: the client's, redirected to the proxy port on the node it
// reaches (one rewrite; the proxy's socket sees the client), and the
// proxy's own, from that node to an endpoint (proxyLeg). Its answers of
// empty sets are the kernel planes': a reject before the redirect, a drop
// of an empty Local set after it (one rewrite). On the eBPF plane a pod's or
// a node's connection to a Service endpoint is translated at connect() by
// the socket load balancer of its node's cgroup (where the lab runs them):
// its packets carry the endpoint's address from the first, so nothing
// rewrites them and the endpoint sees the client.
func traceScenarios(t *testing.T, e *env) {
	np := func(name string) int32 { return e.service(name).Spec.Ports[0].NodePort }
	web := e.service("web")
	proxied := e.l.Info().DataPlane == userspacePlane
	for _, tc := range []struct {
		name, from, to, proto string
		want                  trace.VerdictKind
		rewrites              int // on the way in; -1: not checked
		clientKept            bool
		// endpoint is a pod of the Service and its port ("name:port", in
		// default): where the userspace proxy's own connection goes; ""
		// when no Service endpoint is reached.
		endpoint string
	}{
		{"ClusterIP from a pod, endpoint anywhere", "client-1", "default/web", "", trace.Delivered, -1, false, "web-1:80"},
		{"ClusterIP from a pod on another node", "client-3", "default/solo", "", trace.Delivered, 1, true, "solo:80"},
		{"ClusterIP from a pod on the endpoint's node", "local-2", "default/solo", "", trace.Delivered, 1, true, "solo:80"},
		{"ClusterIP from a node", "node3", "default/solo", "", trace.Delivered, -1, false, "solo:80"},
		{"NodePort, node with an endpoint, Cluster", "client", fmt.Sprintf("node2:%d", np("solo-np")), "", trace.Delivered, 2, false, "solo:80"},
		{"NodePort, node without endpoint, Cluster", "client", fmt.Sprintf("node1:%d", np("solo-np")), "", trace.Delivered, 2, false, "solo:80"},
		{"NodePort, node with an endpoint, Local", "client", fmt.Sprintf("node2:%d", np("local-etp")), "", trace.Delivered, 1, true, "local-2:80"},
		{"NodePort, node without endpoint, Local", "client", fmt.Sprintf("node1:%d", np("local-etp")), "", trace.Dropped, 0, false, ""},
		{"NodePort on every node's pods", "client", fmt.Sprintf("node3:%d", np("web-np")), "", trace.Delivered, 2, false, "web-3:80"},
		{"externalIP from a pod (ETP Cluster: masqueraded)", "client-1", "203.0.113.10:80", "", trace.Delivered, 2, false, "web-1:80"},
		{"hairpin: the endpoint to its own Service", "solo", "default/solo", "", trace.Delivered, 2, false, "solo:80"},
		{"no endpoints: rejected", "client-1", "default/empty", "", trace.Rejected, 0, false, ""},
		{"unknown port of a ClusterIP: rejected", "client-1", web.Spec.ClusterIP + ":81", "", trace.Rejected, 0, false, ""},
		{"internalTrafficPolicy Local without local endpoint: dropped", "client-1", "default/local-itp", "", trace.Dropped, 0, false, ""},
		{"session affinity", "client-1", "default/web-sticky", "", trace.Delivered, -1, false, "web-1:80"},
		{"UDP to a ClusterIP", "client-1", "default/dns:dns-udp", "", trace.Delivered, -1, false, "web-1:5353"},
		{"pod to pod on another node", "client-1", "default/web-2:80", "", trace.Delivered, 0, true, ""},
		{"LoadBalancer IP from the client, to its ARP owner", "client", "default/web-lb", "", trace.Delivered, 2, false, "web-2:80"},
		{"LoadBalancer IP, Local: the owner has the endpoint", "client", "default/local-etp", "", trace.Delivered, 1, true, "local-2:80"},
		{"LoadBalancer IP outside loadBalancerSourceRanges: filtered", "client", "default/web-lb-ranges", "", trace.Filtered, 0, false, ""},
	} {
		if proxied {
			switch {
			case tc.endpoint != "":
				// The first leg: redirected (the node's own traffic:
				// DNATed) to the proxy port, the client's address kept.
				tc.rewrites, tc.clientKept = 1, true
			case tc.want == trace.Dropped:
				// Redirected to the proxy port of the empty Local set,
				// dropped at input.
				tc.rewrites = 1
			}
		}
		if e.l.DataPlane() == cluster.DataPlaneEBPF && tc.from != "client" && tc.endpoint != "" && tc.rewrites > 0 {
			tc.rewrites, tc.clientKept = 0, true
		}
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
			if proxied && tc.endpoint != "" {
				proxyLeg(t, e, tr, tc.endpoint, out)
			}
			if e.l.DataPlane() == cluster.DataPlaneEBPF && tc.from == "client" && tc.endpoint != "" {
				tcPath(t, tr, tc.clientKept, out)
			}
		})
	}
}

// tcPath checks a connection from the client on the eBPF plane: the entry
// node's tc load balancer took it, and Verify found its choice in the tc
// maps with the traced translation: a local backend's masquerade mark
// (externalTrafficPolicy Cluster) or none (Local, clientKept), a remote
// one's SNAT.
func tcPath(t *testing.T, tr *trace.Trace, clientKept bool, out string) {
	t.Helper()
	x := tr.TC
	if !x.Translated() {
		t.Fatalf("the tc load balancer did not take the connection: %+v\n%s", x, out)
	}
	want := "with the masquerade mark, as traced"
	switch {
	case x.Remote():
		want = fmt.Sprintf("SNATed to %s:", x.NodeAddr)
	case clientKept:
		want = "keeping the client's address, as traced"
	}
	if !strings.Contains(out, "  tc:       node "+x.Node+"'s tc load balancer") || !strings.Contains(out, want) {
		t.Errorf("the verification lacks the tc load balancer's maps saying %q\n%s", want, out)
	}
}

// userspacePlane is the --data-plane value of the userspace plane.
const userspacePlane = "userspace"

// proxyLeg checks the two legs of a connection through the userspace plane.
// tr, the first leg, must end at a socket of the node's svcnet proxy (the
// kernel's socket table names its owner): the proxy port its last rewrite
// chose. The second leg, the proxy's own connection from that node to
// endpoint ("pod:port"), is traced to the pod's address and verified
// against the kernel: delivered to the pod with no rewrite, the pod seeing
// the node's address.
func proxyLeg(t *testing.T, e *env, tr *trace.Trace, endpoint, out string) {
	t.Helper()
	last := tr.Hops[len(tr.Hops)-1]
	if last.Place.Kind != trace.PlaceNode || len(last.Rewrites) == 0 || !strings.Contains(tr.Verdict.Reason, "to a socket of the node") {
		t.Fatalf("the first leg ends at %s (%s), want a proxy port of a node, after a redirect\n%s", last.Place, tr.Verdict.Reason, out)
	}
	node, proxyPort := last.Place.Name, last.Rewrites[len(last.Rewrites)-1].After.Dst
	if tr.Choice != nil {
		t.Errorf("the first leg names an endpoint choice (%s, %d candidates); the proxy chooses, not a rule\n%s", tr.Choice.Service, len(tr.Choice.Candidates), out)
	}
	pid, err := e.l.ProxyPid(topology.NodeIndex(node))
	if err != nil || pid == 0 {
		t.Fatalf("%s's proxy: pid %d, %v", node, pid, err)
	}
	kind := "-t"
	if tr.Request.Packet.Proto == "udp" {
		kind = "-u"
	}
	ss, err := e.l.Command(e.place(node), "ss", "-Hlnp", kind, fmt.Sprintf("sport = :%d", proxyPort.Port())).Output()
	if err != nil || !strings.Contains(string(ss), fmt.Sprintf("pid=%d,", pid)) {
		t.Errorf("%s: the socket on %s is not svcnet proxy's (pid %d): %v\n%s\n%s", node, proxyPort, pid, err, ss, out)
	}
	pod, port, _ := strings.Cut(endpoint, ":")
	to := net.JoinHostPort(e.pod(pod).Status.PodIP, port)
	leg, out2 := verifyTrace(t, e, trace.Ask{From: node, To: to, Proto: tr.Request.Packet.Proto})
	end := leg.Hops[len(leg.Hops)-1]
	pod = "default/" + pod
	switch {
	case leg.Verdict.Kind != trace.Delivered || end.Place.Kind != trace.PlacePod || end.Place.Name != pod:
		t.Errorf("the proxy's connection from %s to %s: %s at %s (%s), want delivered to the pod\n%s", node, endpoint, leg.Verdict.Kind, end.Place, leg.Verdict.Reason, out2)
	case leg.Summary.Rewrites != 0 || len(leg.Reply) == 0:
		t.Errorf("the proxy's connection from %s to %s: %d rewrites, %d reply hops; want none, and a reply\n%s", node, endpoint, leg.Summary.Rewrites, len(leg.Reply), out2)
	case end.Arrive.Src.Addr() != leg.Request.Packet.Src.Addr():
		t.Errorf("the pod sees %s, want the node's address %s\n%s", end.Arrive.Src.Addr(), leg.Request.Packet.Src.Addr(), out2)
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
//
// On the userspace plane the trace ends at the proxy port of the node the
// NodePort is on, and the user traces the proxy's own connection, from that
// node to a pod, as a second command (as svcnet demo does).
func traceCommand(t *testing.T, e *env) {
	plane := e.l.Info().DataPlane
	web1 := e.pod("web-1").Status.PodIP
	name, reopen := e.release(t)
	defer reopen()
	switch plane {
	case userspacePlane:
		out := labTraceVerify(t, e, name, "client", "default/web-np",
			"(Service default/web-np, NodePort)", "(--data-plane userspace)", "redirect to :", `comment "default/web-np NodePort"`,
			"delivered to a local socket of node ", "un-DNAT", "summary: 1 rewrite on the way in")
		if strings.Contains(out, "\n    endpoint  ") {
			t.Errorf("lab trace names an endpoint choice on the way to the proxy port:\n%s", out)
		}
		m := regexp.MustCompile(`delivered to a local socket of node (node\d+) `).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("lab trace names no node whose proxy port took the connection:\n%s", out)
		}
		labTraceVerify(t, e, name, m[1], web1+":80",
			"(pod default/web-1)", "end       delivered to pod default/web-1", "summary: 0 rewrites on the way in")
	default:
		// The endpoint choice names the Service port as the plane's rules
		// do: kube-proxy's comments name it "ns/name" (the port is
		// unnamed).
		endpoint := "endpoint  default/web-np:80/tcp"
		if plane == iptablesPlane {
			endpoint = "endpoint  default/web-np, cluster endpoints"
		}
		summary := "summary: 2 rewrites"
		if plane == cluster.DataPlaneEBPF {
			// The entry node's tc load balancer chooses at its eth0's
			// ingress, before netfilter, and says so first.
			summary = "by the tc load balancer (tc ingress eth0 of node "
		}
		labTraceVerify(t, e, name, "client", "default/web-np",
			"(Service default/web-np, NodePort)", "DNAT ", endpoint, "un-DNAT", summary)
	}
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

// maglevTrace: on the eBPF plane, a NodePort Service under Maglev (its
// svcnet.io/scheduler) traced from the client, a few times (each trace
// holds a new ephemeral port): the entry node's tc step names the slot the
// flow hashes to and follows that slot's backend, and the verification
// finds the probe's connection at that backend in the node's conns map.
func maglevTrace(t *testing.T, e *env) {
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-maglev", Namespace: "default",
			Annotations: map[string]string{model.SchedulerAnnotation: "maglev"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	e.applyObjects(controlplane.Object{Origin: "trace_test", Obj: svc})
	np := e.service("web-maglev").Spec.Ports[0].NodePort
	e.eventually("web-maglev's NodePort on node1 from the client", func() error { return e.curl("client", nodeURL(1, np), 1, time.Second)[0].Err })
	// A proxy programs the tc load balancer's maps after the nftables
	// rules, which serve the NodePort meanwhile: the curl may have met
	// the rules alone.
	_, tnet, err := e.l.TraceNetwork(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	open := trace.KernelTCMaps(func(node string) (string, error) { return tnet.NetNS[node], nil })
	fe := netip.AddrPortFrom(topology.NodeAddr(1), uint16(np))
	e.eventually("node1's tc load balancer holds web-maglev's NodePort", func() error {
		m, err := open("node1", "eth0")
		if err != nil {
			return err
		}
		defer m.Close()
		bes, pol, found, err := m.Service(fe, model.ProtocolTCP)
		if err == nil && (!found || len(bes) != 3 || !pol.Maglev) {
			err = fmt.Errorf("its services map entry for %s: found %v, %d backends, Maglev %v; want 3 backends under Maglev", fe, found, len(bes), pol.Maglev)
		}
		return err
	})
	for range 3 {
		tr, out := verifyTrace(t, e, trace.Ask{From: "client", To: fmt.Sprintf("node1:%d", np)})
		x := tr.TC
		switch {
		case !x.Translated() || !x.Maglev || tr.Choice == nil || !tr.Choice.Hashed:
			t.Fatalf("tc decision %+v, choice %+v; want the tc load balancer's Maglev choice\n%s", x, tr.Choice, out)
		case !strings.Contains(out, fmt.Sprintf("hash to slot %d of the frontend's 65537-slot table, which holds %s", x.MaglevSlot, x.Backend)):
			t.Errorf("the trace does not name slot %d and its backend %s\n%s", x.MaglevSlot, x.Backend, out)
		case !strings.Contains(out, fmt.Sprintf("went to %s, the backend of the Maglev slot %d its flow hashes to, as traced", x.Backend, x.MaglevSlot)):
			t.Errorf("the verification does not find the probe at the Maglev slot's backend %s\n%s", x.Backend, out)
		}
	}
}

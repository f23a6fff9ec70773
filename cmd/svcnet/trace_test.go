package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/trace"
)

// traceState is the tracer's scenario fixture: three dual-stack nodes, pods
// and a Service per feature.
const traceState = "../../internal/trace/testdata/cluster"

func traceArgs(extra ...string) []string {
	return append([]string{"trace", "--state", traceState, "--service-cluster-ip-range", "10.96.0.0/12,fd00:96::/108",
		"--from", "172.26.236.10:40000", "--to", "node1:30080"}, extra...)
}

// TestTraceCommandOutputs: `svcnet trace` over manifests, in each output
// format, for a NodePort request from outside the cluster.
func TestTraceCommandOutputs(t *testing.T) {
	out, errOut, code := run(t, traceArgs()...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"(Service default/np, NodePort)", "rules: rendered", "DNAT ", "SNAT ", "un-SNAT", "un-DNAT",
		"endpoint  default/np:80/tcp", "verdict: delivered", "summary: 2 rewrites on the way in"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}

	out, errOut, code = run(t, traceArgs("-o", "json")...)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, errOut)
	}
	var tr trace.Trace
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatalf("json: %v", err)
	}
	if tr.Verdict.Kind != trace.Delivered || tr.Summary.Rewrites != 2 || tr.Request.Packet.Src.Port() != 40000 || tr.Request.EphemeralPort {
		t.Errorf("json trace: verdict %s, %d rewrites, packet %s (ephemeral %v)", tr.Verdict.Kind, tr.Summary.Rewrites, tr.Request.Packet, tr.Request.EphemeralPort)
	}

	out, errOut, code = run(t, traceArgs("-o", "svg")...)
	if code != 0 {
		t.Fatalf("svg: exit %d: %s", code, errOut)
	}
	dec := xml.NewDecoder(strings.NewReader(out))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("svg is not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" || !strings.Contains(out, "DNAT") {
		t.Errorf("svg output: root <%s>, DNAT shown: %v", root, strings.Contains(out, "DNAT"))
	}

	out, errOut, code = run(t, traceArgs("-o", "mermaid")...)
	if code != 0 || !strings.HasPrefix(out, "sequenceDiagram") {
		t.Errorf("mermaid: exit %d (%s), output starts %.40q", code, errOut, out)
	}
}

// TestTraceCommandBadInput: errors name what did not resolve, or why
// --verify cannot run.
// TestTraceCommandIPTables: `svcnet trace --data-plane iptables` explains
// the packet with kube-proxy's chains and rules.
func TestTraceCommandIPTables(t *testing.T) {
	out, errOut, code := run(t, traceArgs("--data-plane", "iptables")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"(Service default/np, NodePort)", "(--data-plane iptables)", "rule: -A KUBE-NODEPORTS ",
		"-m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-", "-j DNAT --to-destination ",
		"endpoint  default/np, cluster endpoints", "verdict: delivered", "summary: 2 rewrites on the way in"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

// TestTraceCommandEBPF: `svcnet trace --data-plane ebpf` shows a pod's
// connect to a ClusterIP translated at the pod by the socket load
// balancer: no DNAT on the way.
func TestTraceCommandEBPF(t *testing.T) {
	out, errOut, code := run(t, "trace", "--state", traceState, "--service-cluster-ip-range", "10.96.0.0/12,fd00:96::/108",
		"--from", "default/client-1:40000", "--to", "default/web", "--data-plane", "ebpf", "--endpoint", "192.168.2.10:8080")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"(--data-plane ebpf)", "connect   tcp 192.168.1.20:40000 → 10.96.0.10:80",
		"at cgroup connect4 of node node1's cgroup", "services map 10.96.0.10:80/tcp → 2 backends", "✓ 1/2    192.168.2.10:8080",
		"sends     tcp 192.168.1.20:40000 → 192.168.2.10:8080", "verdict: delivered",
		"summary: connect() to 10.96.0.10:80 translated to 192.168.2.10:8080 by the socket load balancer (cgroup connect4 of node node1); 0 rewrites on the way in"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "DNAT ") {
		t.Errorf("a DNAT on the way:\n%s", out)
	}
}

func TestTraceCommandBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "--state", traceState, "--from", "client-1", "--to", "default/nope"}, `to "default/nope": not a Service, pod`},
		{[]string{"trace", "--state", traceState, "--from", "nowhere", "--to", "default/web"}, `from "nowhere"`},
		{[]string{"trace", "--state", traceState, "--from", "client-1", "--to", "default/web", "-o", "png"}, `--output "png"`},
		{[]string{"trace", "--state", traceState, "--service-cluster-ip-range", "10.96.0.0/12,fd00:96::/108", "--from", "client-1", "--to", "default/web", "--verify"}, "network namespace"},
		{traceArgs("--data-plane", "ipvs"), `data plane "ipvs": the tracer explains ebpf, iptables, nftables`},
		{traceArgs("--data-plane", "ebpf", "--cgroup", "node1"), `--cgroup "node1": want NODE=PATH`},
	} {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want it to say %q", tc.args, code, errOut, tc.want)
		}
	}
}

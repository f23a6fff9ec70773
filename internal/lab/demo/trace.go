package demo

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/trace"
	"github.com/svcnet/svcnet/internal/trace/diagram"
)

// traceNodePort ends the demo: my-nginx back to externalTrafficPolicy Cluster,
// and the trace of one request from the client to node1's NodePort, verified
// against the kernel's own trace events, with its diagram written to svg.
func (d *demo) traceNodePort(ctx context.Context, l *lab.Lab, svc *corev1.Service, pods []*corev1.Pod, client lab.Place, node1URL, svg string) error {
	nodePort := svc.Spec.Ports[0].NodePort
	d.say("Back to externalTrafficPolicy Cluster, and trace one request from the client to node1's NodePort %d: every hop, hook, chain, rule and rewrite, and the way back, checked against the kernel's own trace (svcnet lab trace client node1:%d --verify).", nodePort, nodePort)
	if d.plane == ebpfplane.Name {
		d.say("On the eBPF plane, node1's tc load balancer decides at eth0 ingress: the trace shows its services map entry and choice, and the check reads its maps (the entry, the probe's connection) besides the kernel's trace events.")
	}
	back := svc.DeepCopy()
	back.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	back.Spec.HealthCheckNodePort = 0
	back.Status = corev1.ServiceStatus{}
	if errs := l.Apply(ctx, []controlplane.Object{{Origin: "demo", Obj: back}}); len(errs) > 0 {
		return fmt.Errorf("apply: %v", errs)
	}
	if err := waitAnswer(ctx, l, client, node1URL); err != nil {
		return err
	}
	ask := trace.Ask{From: "client", To: fmt.Sprintf("node1:%d", nodePort)}
	rep, err := d.verify(ctx, l, ask, netip.AddrPort{})
	if err != nil {
		return err
	}
	if d.plane == "userspace" {
		// The first leg ends at node1's proxy port; the proxy's own
		// connection to a pod is the second, traced on its own.
		d.check(rep.Trace.Summary.Rewrites == 1 && rep.Trace.Summary.ReplyRewrites == 1,
			"one rewrite on the way in (the redirect to node1's proxy port), undone by conntrack on the way back")
		pod := pods[0]
		d.say("The second leg: node1's svcnet proxy accepted the connection on its proxy port and opened its own, from node1 to a pod (round robin; on a failed connect, the next pod). Trace that connection to %s (svcnet lab trace node1 %s:80 --verify):", pod.Name, pod.Status.PodIP)
		if _, err := d.verify(ctx, l, trace.Ask{From: "node1", To: pod.Status.PodIP + ":80"}, netip.AddrPort{}); err != nil {
			return err
		}
	} else {
		if d.plane == ebpfplane.Name {
			if err := d.traceSocket(ctx, l, svc, pods); err != nil {
				return err
			}
		}
		if d.plane == ebpfplane.Name {
			x := rep.Trace.TC
			d.check(x.Remote() && rep.Trace.Summary.Rewrites == 2 && rep.Trace.Summary.ReplyRewrites == 2,
				"two rewrites on the way in (DNAT, SNAT to node1's address) by node1's tc load balancer at eth0 ingress, both undone there on the way back, past node1's netfilter both ways")
		} else {
			d.check(rep.Trace.Summary.Rewrites == 2 && rep.Trace.Summary.ReplyRewrites == 2,
				"two rewrites on the way in (DNAT, masquerade), both undone by conntrack on the way back (\"The Packet's-Eye View of a Kubernetes Service\" counts five on its hostPort path)")
		}
	}
	if svg != "" {
		if err := os.WriteFile(svg, diagram.SVG(rep.Trace), 0o644); err != nil {
			return fmt.Errorf("trace diagram: %w", err)
		}
		fmt.Fprintf(d.out, "    diagram: %s\n", svg)
	}
	return nil
}

// verify traces ask in the lab (following endpoint, when valid, where an
// endpoint is chosen), prints the trace and the comparison with the
// kernel's trace events, checks that they agree, and returns the report.
func (d *demo) verify(ctx context.Context, l *lab.Lab, ask trace.Ask, endpoint netip.AddrPort) (*trace.Report, error) {
	snap, net, err := l.TraceNetwork(ctx)
	if err != nil {
		return nil, err
	}
	opts := l.TraceOptions()
	opts.Endpoint = endpoint
	rep, err := trace.Verify(ctx, snap, net, ask, opts)
	if err != nil {
		return nil, err
	}
	if err := indented(d.out, func(w io.Writer) error {
		if err := trace.WriteText(w, rep.Trace); err != nil {
			return err
		}
		fmt.Fprintln(w)
		return rep.Write(w)
	}); err != nil {
		return nil, err
	}
	d.check(rep.OK(), "the kernel took the traced chains, rules and rewrites")
	return rep, nil
}

// traceSocket traces, on the eBPF plane, a request from a pod to the
// ClusterIP: the socket load balancer's decision at the pod's connect (its
// node's cgroup program, the services map entry, the backend), then a
// packet that no rule rewrites, verified against the kernel's maps and
// trace events.
func (d *demo) traceSocket(ctx context.Context, l *lab.Lab, svc *corev1.Service, pods []*corev1.Pod) error {
	from, to := pods[0].Namespace+"/"+pods[0].Name, pods[1]
	ep, err := netip.ParseAddr(to.Status.PodIP)
	if err != nil {
		return fmt.Errorf("pod %s: IP %q: %w", to.Name, to.Status.PodIP, err)
	}
	d.say("The NodePort came from outside the node, so node1's tc load balancer on eth0 (svcnet proxy --ebpf-external) chose a pod at ingress, before netfilter, and, the pod being on another node, rewrote both addresses and forwarded the packet itself: node1's netfilter never saw it, nor the answer, which the same program translated back. From a pod the connect itself is translated: trace one from %s to the ClusterIP, to the pod on %s (svcnet lab trace %s %s:80 --endpoint %s:80 --verify).",
		pods[0].Name, to.Spec.NodeName, from, svc.Spec.ClusterIP, to.Status.PodIP)
	rep, err := d.verify(ctx, l, trace.Ask{From: from, To: svc.Spec.ClusterIP + ":80"}, netip.AddrPortFrom(ep, 80))
	if err != nil {
		return err
	}
	d.check(rep.Trace.Socket.Translated() && rep.Trace.Summary.Rewrites == 0 && rep.Trace.Summary.ReplyRewrites == 0,
		"the socket load balancer chose the backend at connect(): no rewrite on the way in, none on the way back")
	return nil
}

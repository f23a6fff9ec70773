package demo

import (
	"context"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/trace"
	"github.com/svcnet/svcnet/internal/trace/diagram"
)

// traceNodePort ends the demo: my-nginx back to externalTrafficPolicy Cluster,
// and the trace of one request from the client to node1's NodePort, verified
// against the kernel's own trace events, with its diagram written to svg.
func (d *demo) traceNodePort(ctx context.Context, l *lab.Lab, svc *corev1.Service, client lab.Place, node1URL, svg string) error {
	nodePort := svc.Spec.Ports[0].NodePort
	d.say("Back to externalTrafficPolicy Cluster, and trace one request from the client to node1's NodePort %d: every hop, hook, chain, rule and rewrite, and the way back, checked against the kernel's own trace (svcnet lab trace client node1:%d --verify).", nodePort, nodePort)
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
	snap, net, err := l.TraceNetwork(ctx)
	if err != nil {
		return err
	}
	ask := trace.Ask{From: "client", To: fmt.Sprintf("node1:%d", nodePort)}
	rep, err := trace.Verify(ctx, snap, net, ask, l.TraceOptions())
	if err != nil {
		return err
	}
	if err := indented(d.out, func(w io.Writer) error {
		if err := trace.WriteText(w, rep.Trace); err != nil {
			return err
		}
		fmt.Fprintln(w)
		return rep.Write(w)
	}); err != nil {
		return err
	}
	d.check(rep.OK(), "the kernel took the traced chains, rules and rewrites")
	d.check(rep.Trace.Summary.Rewrites == 2 && rep.Trace.Summary.ReplyRewrites == 2,
		"two rewrites on the way in (DNAT, masquerade), both undone by conntrack on the way back (\"The Packet's-Eye View of a Kubernetes Service\" counts five on its hostPort path)")
	if svg != "" {
		if err := os.WriteFile(svg, diagram.SVG(rep.Trace), 0o644); err != nil {
			return fmt.Errorf("trace diagram: %w", err)
		}
		fmt.Fprintf(d.out, "    diagram: %s\n", svg)
	}
	return nil
}

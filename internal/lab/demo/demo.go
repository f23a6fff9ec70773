package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/printers"
	"github.com/svcnet/svcnet/internal/source/file"
)

// Options configure Run.
type Options struct {
	// Manifests is the setup of the article "Demystifying Kubernetes Services Packet Path": Service my-nginx and its two pods on node2 and
	// node3.
	Manifests string
	Name      string
	Binary    string
	Out       io.Writer
	// Keep leaves the lab up at the end.
	Keep bool
	// SVG is where the closing trace's diagram is written ("" for none).
	SVG string
	// DataPlane is the lab's lab.Options.DataPlane: every node's svcnet
	// proxy's --data-plane ("" for the proxy's default).
	DataPlane string
}

// Run walks through the article "Demystifying Kubernetes Services Packet Path" on a 3-node lab: a LoadBalancer Service with pods on
// node2 and node3 only, reached from a pod through its ClusterIP and from an
// external client through node1's NodePort and through its LoadBalancer IP
// 172.26.236.180 (given by svcnet lb, announced by ARP), first with
// externalTrafficPolicy Cluster, then Local. Every step says what it shows and checks it; Run returns
// an error naming each check that failed. The lab is removed at the end unless
// Keep.
func Run(ctx context.Context, o Options) (err error) {
	d := &demo{out: o.Out, plane: o.DataPlane}
	objs, bad, err := file.ReadManifests(o.Manifests)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("demo manifests: %v", bad)
	}
	d.say("Build a 3-node cluster network from network namespaces (nothing in the host's own).")
	l, err := lab.Up(ctx, lab.Options{Name: o.Name, Nodes: 3, Binary: o.Binary, DataPlane: o.DataPlane, Progress: indent{o.Out}})
	if err != nil {
		return err
	}
	defer func() {
		l.Close()
		if !o.Keep {
			d.say("Tear the lab down.")
			if derr := lab.Down(l.Names().Lab); derr != nil && err == nil {
				err = derr
			}
		}
	}()
	d.say("Apply the setup of the article \"Demystifying Kubernetes Services Packet Path\": Service my-nginx (type LoadBalancer, port 80), pods on node2 and node3, none on node1.")
	if errs := l.Apply(ctx, objs); len(errs) > 0 {
		return fmt.Errorf("apply: %v", errs)
	}
	svc, pods, err := d.seedObjects(ctx, l)
	if err != nil {
		return err
	}
	if err := d.tables(ctx, l); err != nil {
		return err
	}
	if err := d.planeRules(ctx, l, svc, pods); err != nil {
		return err
	}
	if err := waitServed(ctx, l, svc.Spec.Ports[0].NodePort, pods); err != nil {
		return err
	}
	nodePort, hcPort := svc.Spec.Ports[0].NodePort, int32(0)

	if d.plane == ebpfplane.Name {
		d.say("From pod %s to the ClusterIP %s:80: its node's socket load balancer connects each new connection to one of the two pods; when it picks the asking pod itself (hairpin), the pod reaches itself directly and sees its own address %s, with no masquerade.", pods[0].Name, svc.Spec.ClusterIP, pods[0].Status.PodIP)
	} else {
		d.say("From pod %s to the ClusterIP %s:80: the pod's own node DNATs each new connection to one of the two pods; when it picks the asking pod itself (hairpin), it also masquerades, so that pod sees its node's gateway address %s.", pods[0].Name, svc.Spec.ClusterIP, topology.Gateway4(topology.NodeIndex(pods[0].Spec.NodeName)))
	}
	from, err := l.Resolve(ctx, pods[0].Namespace+"/"+pods[0].Name)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP)
	if err := waitAnswer(ctx, l, from, url); err != nil {
		return err
	}
	hits, err := l.Curl(ctx, from, url, 10, 2*time.Second)
	if err != nil {
		return err
	}
	d.hits(url, hits)
	d.check(answeredBy(hits, pods[0].Name, pods[1].Name), "every request answered, by both pods")
	if d.plane == ebpfplane.Name {
		d.check(allSeenAs(hits, pods[0].Status.PodIP), "every pod, the asking one too, saw the client as %s: nothing was rewritten", pods[0].Status.PodIP)
	}
	if err := d.clusterDNS(ctx, l, from, svc); err != nil {
		return err
	}

	client := lab.Place{NS: l.Names().Client()}
	node1 := fmt.Sprintf("http://%s:%d/", topology.NodeAddr(1), nodePort)
	if d.plane == ebpfplane.Name {
		d.say("From the external client %s to node1's NodePort %d (externalTrafficPolicy Cluster): node1 has no pod, so its tc load balancer forwards to node2 and node3, about 50/50, with node1's address as the source.", topology.ClientAddr, nodePort)
	} else {
		d.say("From the external client %s to node1's NodePort %d (externalTrafficPolicy Cluster): node1 has no pod, so it forwards to node2 and node3, about 50/50, and masquerades the client's address as its own.", topology.ClientAddr, nodePort)
	}
	hits, err = l.Curl(ctx, client, node1, 20, 2*time.Second)
	if err != nil {
		return err
	}
	d.hits(node1, hits)
	d.check(answeredBy(hits, pods[0].Name, pods[1].Name), "every request answered, by both pods")
	d.check(allClients(hits, topology.NodeAddr(1).String()), "the pods saw node1's address %s, not the client's", topology.NodeAddr(1))
	if err := d.loadBalancer(ctx, l, svc, pods, client); err != nil {
		return err
	}

	d.say("Switch my-nginx to externalTrafficPolicy Local: each node sends external traffic only to its own pods and keeps the client's address.")
	local := svc.DeepCopy()
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	local.Status = corev1.ServiceStatus{}
	if errs := l.Apply(ctx, []controlplane.Object{{Origin: "demo", Obj: local}}); len(errs) > 0 {
		return fmt.Errorf("apply: %v", errs)
	}
	if svc, _, err = d.seedObjects(ctx, l); err != nil {
		return err
	}
	hcPort = svc.Spec.HealthCheckNodePort
	d.say("The control plane gave it healthCheckNodePort %d; wait until every node's proxy serves it (so all have the new policy): 503 on node1, 200 on node2 and node3.", hcPort)
	for i := 1; i <= 3; i++ {
		want := http.StatusOK
		if i == 1 {
			want = http.StatusServiceUnavailable
		}
		if err := waitHealth(ctx, l, client, i, hcPort, want); err != nil {
			return err
		}
	}
	d.say("From the client to node1's NodePort: node1 has no local pod, so it drops the traffic (the requests time out).")
	hits, err = l.Curl(ctx, client, node1, 3, time.Second)
	if err != nil {
		return err
	}
	d.hits(node1, hits)
	d.check(allFailed(hits), "node1 answered nothing")
	for i, p := range pods {
		node := topology.NodeIndex(p.Spec.NodeName)
		u := fmt.Sprintf("http://%s:%d/", topology.NodeAddr(node), nodePort)
		if d.plane == "userspace" {
			// The userspace proxy connects to the pod itself: no plane
			// that proxies in user space keeps the client's address.
			d.say("From the client to %s's NodePort: answered by its own pod, which sees %s's address: the userspace proxy's own connection loses the client's.", p.Spec.NodeName, p.Spec.NodeName)
		} else {
			d.say("From the client to %s's NodePort: answered by its own pod, which sees the client's real address %s.", p.Spec.NodeName, topology.ClientAddr)
		}
		hits, err = l.Curl(ctx, client, u, 5, 2*time.Second)
		if err != nil {
			return err
		}
		d.hits(u, hits)
		if d.plane == "userspace" {
			d.check(answeredBy(hits, pods[i].Name) && clientsIn(hits, topology.NodeAddr(node).String(), topology.Gateway4(node).String()),
				"answered by %s, which sees %s's address (%s or %s), not the client's", pods[i].Name, p.Spec.NodeName, topology.NodeAddr(node), topology.Gateway4(node))
		} else {
			d.check(answeredBy(hits, pods[i].Name) && allClients(hits, topology.ClientAddr.String()), "answered by %s, client %s kept", pods[i].Name, topology.ClientAddr)
		}
	}
	if err := d.loadBalancer(ctx, l, svc, pods, client); err != nil {
		return err
	}
	d.say("The healthCheckNodePort %d tells a load balancer which nodes to use: 503 on node1 (no local endpoint), 200 on node2 and node3.", hcPort)
	for i := 1; i <= 3; i++ {
		code, body, err := healthGet(ctx, l, client, i, hcPort)
		if err != nil {
			return err
		}
		var compact bytes.Buffer
		if json.Compact(&compact, []byte(body)) != nil {
			compact.Reset()
			compact.WriteString(strings.TrimSpace(body))
		}
		fmt.Fprintf(d.out, "    GET http://%s:%d/ -> %d %s\n", topology.NodeAddr(i), hcPort, code, compact.String())
		want := http.StatusOK
		if i == 1 {
			want = http.StatusServiceUnavailable
		}
		d.check(code == want, "node%d answers %d", i, want)
	}
	if err := d.traceNodePort(ctx, l, svc, pods, client, node1, o.SVG); err != nil {
		return err
	}
	if len(d.failed) > 0 {
		return fmt.Errorf("demo: %d check(s) failed: %s", len(d.failed), strings.Join(d.failed, "; "))
	}
	fmt.Fprintln(d.out, "\nAll checks passed.")
	return nil
}

type demo struct {
	out io.Writer
	// plane is the lab's data plane ("" for the default).
	plane  string
	step   int
	failed []string
}

func (d *demo) say(format string, args ...any) {
	d.step++
	fmt.Fprintf(d.out, "\n%d. %s\n", d.step, fmt.Sprintf(format, args...))
}

func (d *demo) check(ok bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if ok {
		fmt.Fprintf(d.out, "    ok: %s\n", msg)
		return
	}
	fmt.Fprintf(d.out, "    FAILED: %s\n", msg)
	d.failed = append(d.failed, msg)
}

func (d *demo) hits(url string, hits []lab.Hit) {
	_ = indented(d.out, func(w io.Writer) error { lab.PrintHits(w, url, hits); return nil })
}

// seedObjects returns my-nginx and its pods (ordered by node) as the control plane
// holds them.
func (d *demo) seedObjects(ctx context.Context, l *lab.Lab) (*corev1.Service, []*corev1.Pod, error) {
	r, err := l.Get(ctx)
	if err != nil {
		return nil, nil, err
	}
	var svc *corev1.Service
	for _, s := range r.Services {
		if s.Namespace == "default" && s.Name == "my-nginx" {
			svc = s
		}
	}
	if svc == nil || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
		return nil, nil, fmt.Errorf("demo: Service default/my-nginx with a NodePort not found")
	}
	var pods []*corev1.Pod
	for _, p := range r.Pods {
		if p.Labels["run"] == "my-nginx" && p.Status.PodIP != "" {
			pods = append(pods, p)
		}
	}
	if len(pods) != 2 {
		return nil, nil, fmt.Errorf("demo: want 2 running my-nginx pods, have %d", len(pods))
	}
	if pods[0].Spec.NodeName > pods[1].Spec.NodeName {
		pods[0], pods[1] = pods[1], pods[0]
	}
	return svc, pods, nil
}

func (d *demo) tables(ctx context.Context, l *lab.Lab) error {
	r, err := l.Get(ctx)
	if err != nil {
		return err
	}
	opts := printers.Options{Now: time.Now()}
	d.say("The Service and its EndpointSlice, as `kubectl get svc` and `kubectl get endpointslices` show them in the article (EXTERNAL-IP from svcnet lb's pool):")
	var svcs []*corev1.Service
	for _, s := range r.Services {
		if s.Namespace == "default" {
			svcs = append(svcs, s)
		}
	}
	if err := indented(d.out, func(w io.Writer) error { return printers.Services(w, svcs, opts) }); err != nil {
		return err
	}
	fmt.Fprintln(d.out)
	return indented(d.out, func(w io.Writer) error { return printers.EndpointSlices(w, r.EndpointSlices, opts) })
}

// indent prefixes every line written with four spaces. Writers that write a
// line in pieces (tables) must write through a buffer first (indented).
type indent struct{ w io.Writer }

func (i indent) Write(b []byte) (int, error) {
	s := strings.TrimRight(string(b), "\n")
	s = "    " + strings.ReplaceAll(s, "\n", "\n    ") + "\n"
	if _, err := io.WriteString(i.w, s); err != nil {
		return 0, err
	}
	return len(b), nil
}

// indented runs print into a buffer and writes the result indented.
func indented(w io.Writer, print func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := print(&buf); err != nil {
		return err
	}
	_, err := indent{w}.Write(buf.Bytes())
	return err
}

// allSeenAs reports whether every hit was answered and saw the client as ip.
func allSeenAs(hits []lab.Hit, ip string) bool {
	for _, h := range hits {
		if h.Err != nil || h.ClientIP() != ip {
			return false
		}
	}
	return len(hits) > 0
}

func answeredBy(hits []lab.Hit, pods ...string) bool {
	seen := map[string]bool{}
	for _, h := range hits {
		if h.Err != nil {
			return false
		}
		seen[h.Reply.Pod] = true
	}
	for _, p := range pods {
		if !seen[p] {
			return false
		}
	}
	return len(seen) == len(pods)
}

func allClients(hits []lab.Hit, ip string) bool {
	for _, h := range hits {
		if h.Err != nil || h.ClientIP() != ip {
			return false
		}
	}
	return len(hits) > 0
}

func allFailed(hits []lab.Hit) bool {
	for _, h := range hits {
		if h.Err == nil {
			return false
		}
	}
	return true
}

// waitAnswer waits (bounded) until url answers from the place: until the
// proxies have programmed what was just applied.
func waitAnswer(ctx context.Context, l *lab.Lab, from lab.Place, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		hits, err := l.Curl(ctx, from, url, 1, time.Second)
		if err != nil {
			return err
		}
		if hits[0].Err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not answer after 30s: %w", url, hits[0].Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitServed waits (bounded) until every node's proxy sends my-nginx's
// traffic to all its pods: until each pod has answered through every
// node's NodePort (externalTrafficPolicy Cluster), so that the counted
// requests of the demo's steps meet rules with every endpoint.
func waitServed(ctx context.Context, l *lab.Lab, nodePort int32, pods []*corev1.Pod) error {
	client := lab.Place{NS: l.Names().Client()}
	deadline := time.Now().Add(30 * time.Second)
	for i := 1; i <= 3; i++ {
		url := fmt.Sprintf("http://%s:%d/", topology.NodeAddr(i), nodePort)
		seen := map[string]bool{}
		for len(seen) < len(pods) {
			hits, err := l.Curl(ctx, client, url, 1, time.Second)
			if err != nil {
				return err
			}
			if hits[0].Err == nil {
				seen[hits[0].Reply.Pod] = true
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node%d's NodePort %d: answered only by %v after 30s", i, nodePort, seen)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// waitHealth waits (bounded) until node i serves healthCheckNodePort port with 200.
func waitHealth(ctx context.Context, l *lab.Lab, from lab.Place, i int, port int32, want int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, err := healthGet(ctx, l, from, i, port)
		if err == nil && code == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node%d: healthCheckNodePort %d not %d after 30s (%d, %v)", i, port, want, code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// healthGet GETs node i's healthCheckNodePort from the place.
func healthGet(ctx context.Context, l *lab.Lab, from lab.Place, i int, port int32) (int, string, error) {
	return l.HTTPGet(ctx, from, fmt.Sprintf("http://%s:%d/", topology.NodeAddr(i), port))
}

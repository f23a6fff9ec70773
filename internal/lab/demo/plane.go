package demo

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/model"
)

// planeRules shows what the node's data plane programmed for svc, in the
// words of the article the plane follows: for iptables, the chains of
// "Demystifying Kubernetes Services Packet Path" (`iptables -t nat -S
// KUBE-SERVICES`, then the Service's KUBE-SVC chain with its statistic
// rules, then one KUBE-SEP chain with its DNAT); for userspace, the proxy
// ports listening on the node and the redirect rules that send the
// Service's traffic to them; for ebpf, the socket load balancer's entry for
// the ClusterIP. Other planes show nothing here.
func (d *demo) planeRules(ctx context.Context, l *lab.Lab, svc *corev1.Service, pods []*corev1.Pod) error {
	node := lab.Place{NS: l.Names().Node(1)}
	run := func(argv ...string) (string, error) {
		out, err := l.CommandContext(ctx, node, argv...).CombinedOutput()
		fmt.Fprintf(d.out, "    $ %s\n", strings.Join(argv, " "))
		if err != nil {
			return "", fmt.Errorf("%s in node1: %w: %s", strings.Join(argv, " "), err, out)
		}
		_, _ = indent{d.out}.Write(out)
		return string(out), nil
	}
	name := svc.Namespace + "/" + svc.Name
	// The node's proxy programs the Service and its endpoints a moment
	// after they are applied: wait (bounded) until the plane's state has
	// the ClusterIP and, on iptables, a KUBE-SEP rule per pod.
	output := func(argv ...string) string {
		out, _ := l.CommandContext(ctx, node, argv...).Output()
		return string(out)
	}
	ready := map[string]func() bool{
		"iptables": func() bool {
			out := output("iptables", "-t", "nat", "-S", "KUBE-SERVICES")
			c := chainFor(out, fmt.Sprintf(`-d %s/32 .*-j (KUBE-SVC-[A-Z0-9]+)`, regexp.QuoteMeta(svc.Spec.ClusterIP)))
			return c != "" && strings.Count(output("iptables", "-t", "nat", "-S", c), "-j KUBE-SEP-") == len(pods)
		},
		"userspace": func() bool {
			return strings.Contains(output("nft", "list", "table", "ip", "svcnet-userspace"), svc.Spec.ClusterIP)
		},
		ebpfplane.Name: func() bool {
			bes, _, err := socketEntry(l, 1, svc)
			return err == nil && len(bes) == len(pods)
		},
	}[d.plane]
	if ready == nil {
		return nil
	}
	for deadline := time.Now().Add(15 * time.Second); !ready(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("node1's %s plane did not program %s (ClusterIP %s, %d pods) within 15s", d.plane, name, svc.Spec.ClusterIP, len(pods))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	switch d.plane {
	case "iptables":
		d.say("The data plane is iptables, as kube-proxy's default mode: node1's nat table sends the ClusterIP %s:80 from KUBE-SERVICES to the Service's KUBE-SVC chain.", svc.Spec.ClusterIP)
		out, err := run("iptables", "-t", "nat", "-S", "KUBE-SERVICES")
		if err != nil {
			return err
		}
		svcChain := chainFor(out, fmt.Sprintf(`-d %s/32 .*"%s:?[^ ]* cluster IP" .*-j (KUBE-SVC-[A-Z0-9]+)`, regexp.QuoteMeta(svc.Spec.ClusterIP), regexp.QuoteMeta(name)))
		d.check(svcChain != "", "KUBE-SERVICES jumps to a KUBE-SVC chain for %s", name)
		if svcChain == "" {
			return nil
		}
		d.say("%s picks an endpoint with -m statistic --mode random: the first rule with probability 1/2, the last one always; each KUBE-SEP chain DNATs to one pod.", svcChain)
		out, err = run("iptables", "-t", "nat", "-S", svcChain)
		if err != nil {
			return err
		}
		sep := chainFor(out, `--probability 0\.5\d* -j (KUBE-SEP-[A-Z0-9]+)`)
		d.check(sep != "" && strings.Count(out, "-j KUBE-SEP-") == len(pods), "%s has %d KUBE-SEP rules, the first with probability 0.5", svcChain, len(pods))
		if sep == "" {
			return nil
		}
		out, err = run("iptables", "-t", "nat", "-S", sep)
		if err != nil {
			return err
		}
		d.check(podDNAT(out, pods), "%s DNATs to one of the pods", sep)
	case "userspace":
		d.say("The data plane is userspace, as kube-proxy's first mode: node1's svcnet proxy listens on a proxy port of its own for %s, and the kernel redirects the Service's traffic to it; the proxy then opens a second connection to a pod (which sees node1's address, not the client's).", name)
		out, err := run("ss", "-ltnp")
		if err != nil {
			return err
		}
		d.check(strings.Contains(out, "svcnet"), "svcnet proxy listens on its proxy ports")
		out, err = run("nft", "list", "table", "ip", "svcnet-userspace")
		if err != nil {
			return err
		}
		d.check(strings.Contains(out, svc.Spec.ClusterIP) && strings.Contains(out, "redirect to :"), "the ClusterIP %s is redirected to a proxy port", svc.Spec.ClusterIP)
	case ebpfplane.Name:
		bes, dir, err := socketEntry(l, 1, svc)
		if err != nil {
			return err
		}
		d.say("The data plane is eBPF: node1's svcnet proxy attached its socket load balancer (cgroup connect, sendmsg, recvmsg and getpeername programs) to node1's cgroup, where the node's pods and agents run, and holds %s in its services map:", name)
		fmt.Fprintf(d.out, "    cgroup %s\n    services map %s:80/tcp → %s\n", dir, svc.Spec.ClusterIP, bes)
		d.check(len(bes) == len(pods) && podBackends(bes, pods), "the services map sends %s:80 to the %d pods", svc.Spec.ClusterIP, len(pods))
		d.say("A pod's connect to the ClusterIP is connected to one of them at once: its packets carry the pod's address from the first, so no rule rewrites them. Traffic from outside the node (NodePort, the LoadBalancer IP) meets its tc load balancer on eth0 instead (svcnet proxy --ebpf-external): tc programs that choose a pod before netfilter, and forward a connection to a pod on another node themselves, from the node's address.")
	}
	return nil
}

// socketEntry reads the backends node i's socket load balancer holds for
// svc's ClusterIP, port 80, TCP, and returns them with the node's cgroup
// directory.
func socketEntry(l *lab.Lab, i int, svc *corev1.Service) ([]netip.AddrPort, string, error) {
	dir, err := l.Names().NodeCgroupDir(i)
	if err != nil {
		return nil, "", err
	}
	fe, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return nil, dir, fmt.Errorf("ClusterIP %q: %w", svc.Spec.ClusterIP, err)
	}
	v, err := socklb.OpenAttached(dir)
	if err != nil {
		return nil, dir, err
	}
	defer v.Close()
	bes, _, err := v.Lookup(netip.AddrPortFrom(fe, 80), model.ProtocolTCP)
	return bes, dir, err
}

// podBackends reports whether every backend is one of pods, port 80.
func podBackends(bes []netip.AddrPort, pods []*corev1.Pod) bool {
	for _, be := range bes {
		if !slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return p.Status.PodIP == be.Addr().String() && be.Port() == 80 }) {
			return false
		}
	}
	return true
}

// chainFor returns the first submatch of pattern in out, "" if none.
func chainFor(out, pattern string) string {
	m := regexp.MustCompile(pattern).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return m[1]
}

// podDNAT reports whether a DNAT rule of out goes to one of pods.
func podDNAT(out string, pods []*corev1.Pod) bool {
	for _, p := range pods {
		if p.Status.PodIP != "" && strings.Contains(out, "--to-destination "+p.Status.PodIP+":") {
			return true
		}
	}
	return false
}

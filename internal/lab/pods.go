//lint:file-ignore ST1005 errors start with the object's kind and name, as the apiserver's do ("Pod NS/NAME: ...")

package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// readyTimeout bounds the wait for a pod's server to listen.
const readyTimeout = 15 * time.Second

// applyPod does what the scheduler, the kubelet and the container runtime do for
// one Pod: pick its node (spec.nodeName, else round robin), make its namespace
// through the CNI plugin, run its process in it (see podArgv: `svcnet echo` on
// every containerPort, or `svcnet dns`), and report it running and ready once it
// serves (see waitPodReady). A Pod that exists is
// left running; only its labels and annotations are updated, since a Pod's spec is
// immutable.
func (l *Lab) applyPod(ctx context.Context, pod *corev1.Pod) error {
	id := pod.Namespace + "/" + pod.Name
	old, err := l.c.CP.Pod(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	if old != nil && cluster.IsAgentPod(old) {
		return cluster.ErrAgentPod(old)
	}
	if old != nil && old.DeletionTimestamp == nil {
		if pod.Spec.NodeName == "" {
			pod.Spec.NodeName = old.Spec.NodeName
		}
		if !equality.Semantic.DeepEqual(containerPorts(old), containerPorts(pod)) || pod.Spec.NodeName != old.Spec.NodeName {
			return fmt.Errorf("Pod %s: spec is immutable: delete the pod first (svcnet lab delete pod %s -n %s)", id, pod.Name, pod.Namespace)
		}
		old.Labels, old.Annotations = pod.Labels, pod.Annotations
		return l.c.CP.SetPodStatus(ctx, old)
	}
	if old != nil {
		return fmt.Errorf("Pod %s: is terminating; apply it again once it is gone", id)
	}
	node, err := l.schedule(pod)
	if err != nil {
		return fmt.Errorf("Pod %s: %w", id, err)
	}
	pod.Spec.NodeName = node
	pod.Status = corev1.PodStatus{}
	if err := l.c.CP.CreatePod(ctx, pod); err != nil {
		return fmt.Errorf("Pod %s: %w", id, err)
	}
	if err := l.startPod(ctx, pod); err != nil {
		_ = l.stopPod(ctx, pod)
		_ = l.c.CP.RemovePod(ctx, pod.Namespace, pod.Name)
		return err
	}
	return nil
}

// containerPorts is the part of a Pod's spec the lab acts on.
func containerPorts(p *corev1.Pod) [][]corev1.ContainerPort {
	var out [][]corev1.ContainerPort
	for _, c := range p.Spec.Containers {
		out = append(out, c.Ports)
	}
	return out
}

// schedule returns the Pod's node: the one it names (which must exist), else the
// next in round-robin order.
func (l *Lab) schedule(pod *corev1.Pod) (string, error) {
	if n := pod.Spec.NodeName; n != "" {
		if i := topology.NodeIndex(n); i < 1 || i > l.c.Info.Nodes {
			return "", fmt.Errorf("spec.nodeName: node %q is not in this lab (node1..node%d)", n, l.c.Info.Nodes)
		}
		return n, nil
	}
	node := topology.NodeName(l.c.Info.NextNode%l.c.Info.Nodes + 1)
	l.c.Info.NextNode++
	return node, cluster.WriteInfo(l.c.Names, l.c.Info)
}

func (l *Lab) startPod(ctx context.Context, pod *corev1.Pod) error {
	id := pod.Namespace + "/" + pod.Name
	podNS, ips, err := topology.WirePod(ctx, l.c.Names, l.c.Info.Stack(), pod)
	if err != nil {
		return err
	}
	defer podNS.Close()
	logPath := l.c.Names.Path("logs", "pod."+topology.PodKey(pod.Namespace, pod.Name)+".log")
	cg, err := l.c.NodeCgroup(topology.NodeIndex(pod.Spec.NodeName))
	if err != nil {
		return fmt.Errorf("Pod %s: %w", id, err)
	}
	pid, err := l.c.StartSupervised(podNS, logPath, cluster.Supervision{Pod: pod, Readiness: podReadiness(pod, ips[0]), Cgroup: cg,
		Argv: topology.PodCommand(topology.PodHostname(pod), l.podArgv(pod, ips[0])...)})
	if err != nil {
		return fmt.Errorf("Pod %s: %w", id, err)
	}
	if err := l.waitPodReady(ctx, podNS, pod, ips[0], pid, logPath); err != nil {
		return fmt.Errorf("Pod %s: not ready: %w (log: %s)", id, err, logPath)
	}
	pod.Status = cluster.PodStatus(ips, l.c.Info.Stack().NodeAddr(topology.NodeIndex(pod.Spec.NodeName)), pod)
	return l.c.CP.SetPodStatus(ctx, pod)
}

// waitListening waits until every TCP port accepts on the pod's address.
func waitListening(ctx context.Context, ns *netns.NS, ip netip.Addr, ports []int32) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	dial := netns.Dialer(ns)
	for _, p := range ports {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(int(p)))
		for {
			c, err := dial(ctx, "tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("port %d: %w", p, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// stopPod stops the pod's processes and removes its sandbox (see
// topology.UnwirePod). It succeeds when there is nothing left.
func (l *Lab) stopPod(ctx context.Context, pod *corev1.Pod) error {
	return topology.UnwirePod(ctx, l.c.Names, pod)
}

// DeletePod deletes a Pod gracefully, as Kubernetes does: it is marked terminating
// (its endpoints stay serving but not ready, so proxies stop sending it new
// connections) while its server keeps running for the grace period; then the
// server is stopped, the pod unwired and the Pod removed.
func (l *Lab) DeletePod(ctx context.Context, namespace, name string, grace time.Duration) error {
	if err := controlplane.ValidateName("Pod", namespace, name); err != nil {
		return err
	}
	pod, err := l.c.CP.Pod(ctx, namespace, name)
	if err != nil {
		return err
	}
	if pod == nil {
		return fmt.Errorf("Pod %s/%s: not found", namespace, name)
	}
	if cluster.IsAgentPod(pod) {
		return cluster.ErrAgentPod(pod)
	}
	if err := l.c.CP.TerminatePod(ctx, namespace, name, int64(grace/time.Second)); err != nil {
		return fmt.Errorf("Pod %s/%s: %w", namespace, name, err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(grace):
	}
	if err := l.stopPod(ctx, pod); err != nil {
		return fmt.Errorf("Pod %s/%s: %w", namespace, name, err)
	}
	return l.c.CP.RemovePod(ctx, namespace, name)
}

// podReadiness are a lab pod's readiness probes: a tcpSocket probe of every
// TCP containerPort on its address, the ports waitListening waits for.
func podReadiness(pod *corev1.Pod, ip netip.Addr) []string {
	tcp, _ := cluster.ServerPorts(pod)
	var out []string
	for _, p := range tcp {
		out = append(out, "tcp://"+netip.AddrPortFrom(ip, uint16(p)).String())
	}
	return out
}

package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// The lab's agents as Pods: each process the lab runs that is not a pod's
// server is a Pod of kube-system in the host network, as kubeadm runs
// kube-proxy and the add-ons, so that `lab get pods -n kube-system` lists it
// with its restarts (see Supervise). A node's agents are named as the kubelet
// names the mirror Pods of its static Pods, AGENT-NODE (svcnet-proxy-node1,
// kube-proxy-node1); the LoadBalancer controller, which runs in the control
// plane's namespace (not a Node of the lab), is svcnet-lb-controller, with no
// node. They carry the annotation AgentAnnotation; the lab refuses to apply
// or delete them: they come and go with the lab and its proxy (SetProxy).
const (
	// AgentAnnotation marks the Pods of the lab's agents.
	AgentAnnotation = "lab.svcnet.io/agent"
	// LBControllerPod is the Pod of `svcnet lb controller` (kube control plane).
	LBControllerPod = "svcnet-lb-controller"
	// ControlPlanePod is the Pod of the embedded control plane's daemon
	// (file control plane; see ServeControlPlane), as kubeadm runs
	// kube-apiserver as a Pod of kube-system.
	ControlPlanePod = "svcnet-control-plane"
	// controlPlaneReady bounds the wait for a started control-plane daemon
	// to listen.
	controlPlaneReady = 30 * time.Second
	// svcnetImage names the image of an agent that runs svcnet (a lab process
	// runs the lab's binary, never an image).
	svcnetImage = "svcnet"
	// lbHealthzPort is where `svcnet lb controller` answers /healthz (its
	// --metrics-bind-address default), in the control plane's namespace.
	lbHealthzPort = 10251
	// lbControllerReady bounds the wait for a started lb controller's /healthz.
	lbControllerReady = 30 * time.Second
)

// agentPod is the Pod of one agent (what, for messages) running argv, on node
// ("" for the control plane's namespace). Its k8s-app label is its name
// without the node, as kubeadm labels kube-proxy's Pods.
func agentPod(name, what, container, image, node string, argv []string) *corev1.Pod {
	app := name
	if node != "" {
		app = strings.TrimSuffix(name, "-"+node)
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem,
			Labels:      map[string]string{"k8s-app": app},
			Annotations: map[string]string{AgentAnnotation: what}},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true,
			Containers: []corev1.Container{{Name: container, Image: image, Command: argv}}},
	}
}

// IsAgentPod reports whether p is the Pod of one of the lab's agents.
func IsAgentPod(p *corev1.Pod) bool {
	_, ok := p.Annotations[AgentAnnotation]
	return ok
}

// nodeAgentPod is the Pod of node i's agent a.
func nodeAgentPod(i int, a agent) *corev1.Pod {
	container, image := "svcnet-proxy", svcnetImage
	if agentKind(a.argv, topology.NodeName(i)) == kubeProxyBinary {
		container, image = kubeProxyBinary, kubeProxyBinary
	}
	return agentPod(container+"-"+topology.NodeName(i), a.what, container, image, topology.NodeName(i), a.argv)
}

// processNamespace is the namespace that Pod namespace/name's process runs
// in: a node's or the control plane's for the lab's agents, else the pod's
// own.
func (c *Cluster) processNamespace(namespace, name string) string {
	if namespace == metav1.NamespaceSystem {
		switch name {
		case LBControllerPod:
			return c.Names.Control()
		case ControlPlanePod:
			return c.Names.Fabric()
		}
		for i := 1; i <= c.Info.Nodes; i++ {
			if strings.HasSuffix(name, "-"+topology.NodeName(i)) &&
				(strings.HasPrefix(name, "svcnet-proxy-") || strings.HasPrefix(name, kubeProxyBinary+"-")) {
				return c.Names.Node(i)
			}
		}
	}
	return c.Names.Pod(namespace, name)
}

// startNodeAgent records node i's agent a as its Pod and starts it,
// supervised, in the node's namespace ns and cgroup; it returns the
// supervisor's pid.
// The agent whose /healthz is on kube-proxy's port is the node's Service
// proxy: its health is the Node's Ready condition.
func (c *Cluster) startNodeAgent(ctx context.Context, ns *netns.NS, i int, a agent) (int, error) {
	pod := nodeAgentPod(i, a)
	if err := c.recordAgentPod(ctx, pod); err != nil {
		return 0, err
	}
	cg, err := c.NodeCgroup(i)
	if err != nil {
		return 0, err
	}
	s := Supervision{Pod: pod, Argv: a.argv, Cgroup: cg,
		Readiness: []string{fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(c.Info.Stack().NodeAddr(i), uint16(a.healthzPort)))}}
	if a.healthzPort == kubeProxyHealthzPort {
		s.Node = topology.NodeName(i)
	}
	return c.StartSupervised(ns, a.log, s)
}

// recordAgentPod creates an agent's Pod, replacing one left by an earlier
// run of the agent (a Pod's spec is immutable).
func (c *Cluster) recordAgentPod(ctx context.Context, pod *corev1.Pod) error {
	id := pod.Namespace + "/" + pod.Name
	old, err := c.CP.Pod(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return fmt.Errorf("Pod %s: %w", id, err)
	}
	if old != nil {
		if err := c.CP.RemovePod(ctx, pod.Namespace, pod.Name); err != nil {
			return fmt.Errorf("Pod %s: %w", id, err)
		}
	}
	if err := c.CP.CreatePod(ctx, pod); err != nil {
		return fmt.Errorf("Pod %s: %w", id, err)
	}
	return nil
}

// AgentRunning posts an agent's Pod running and ready at addr, as the
// kubelet posts a started host-network Pod (its supervisor posts what
// happens to it afterwards).
func (c *Cluster) AgentRunning(ctx context.Context, pod *corev1.Pod, addr netip.Addr) error {
	pod.Status = PodStatus([]netip.Addr{addr}, addr, pod)
	if err := c.CP.SetPodStatus(ctx, pod); err != nil {
		return fmt.Errorf("Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// removeNodeAgentPods removes the Pods of node i's agents (theirs stopped).
func (c *Cluster) removeNodeAgentPods(ctx context.Context, i int) error {
	for _, a := range c.agents(i) {
		p := nodeAgentPod(i, a)
		if err := c.CP.RemovePod(ctx, p.Namespace, p.Name); err != nil {
			return fmt.Errorf("Pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// stopNodeAgents stops node i's agents and their supervisors (each supervisor
// stops its child; any child left is stopped after), and checks that none is
// left.
func (c *Cluster) stopNodeAgents(i int) error {
	for round := 0; ; round++ {
		sups, err := supervisorsIn(c.Names.Node(i))
		if err != nil {
			return fmt.Errorf("node %s: %w", topology.NodeName(i), err)
		}
		pids, err := c.agentPids(i)
		if err != nil {
			return err
		}
		for _, s := range sups {
			pids = append(pids, s.pid)
		}
		if len(pids) == 0 {
			return nil
		}
		if round == topology.StopRounds {
			return fmt.Errorf("node %s: agents %v still running after %d stops", topology.NodeName(i), pids, topology.StopRounds)
		}
		if err := topology.StopPids(pids, agentStopGrace); err != nil {
			return fmt.Errorf("node %s: stop agents: %w", topology.NodeName(i), err)
		}
	}
}

// startLBController starts `svcnet lb controller` (argv), supervised, in the
// control plane's namespace cp as the Pod kube-system/svcnet-lb-controller,
// and posts it running once its /healthz answers (bounded by
// lbControllerReady).
func (c *Cluster) startLBController(ctx context.Context, cp *netns.NS, argv []string) error {
	pod := agentPod(LBControllerPod, "svcnet lb controller", "controller", svcnetImage, "", argv)
	if err := c.recordAgentPod(ctx, pod); err != nil {
		return err
	}
	url := fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(c.Info.Stack().ControlAddr(), lbHealthzPort))
	log := c.Names.Path("logs", "lb-controller.log")
	sup, err := c.StartSupervised(cp, log, Supervision{Pod: pod, Argv: argv, Readiness: []string{url}})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(cp)}, Timeout: 2 * time.Second}
	err = waitAgent(ctx, "svcnet lb controller", url, sup, log, lbControllerReady, 100*time.Millisecond, func() error {
		_, err := getOK(hc, url, 4<<10)
		return err
	})
	if err != nil {
		return err
	}
	return c.AgentRunning(ctx, pod, c.Info.Stack().ControlAddr())
}

// waitAgent waits until answers, a probe of where (a URL, a socket),
// succeeds: every interval, bounded by bound. It fails at once, with the
// tail of the log, when the child of the supervisor sup exits.
func waitAgent(ctx context.Context, what, where string, sup int, log string, bound, interval time.Duration, answers func() error) error {
	w := NewChildWatch(sup, log)
	deadline := time.Now().Add(bound)
	for {
		if w.Ended() {
			return fmt.Errorf("%s exited:\n%s", what, topology.LogTail(log, 10))
		}
		err := answers()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not answering after %s: %w:\n%s", what, where, bound, err, topology.LogTail(log, 10))
		}
		if !sleepCtx(ctx, interval) {
			return ctx.Err()
		}
	}
}

// StartControlPlane starts the embedded control plane's daemon (`svcnet lab
// control-plane`), supervised, in the fabric's namespace fabric as the Pod
// kube-system/svcnet-control-plane, waits until it listens (bounded by
// controlPlaneReady), posts it running and makes c's control plane send its
// changes there. The Pod is recorded by this process itself, as the
// daemon's own first change would have nowhere to go.
func (c *Cluster) StartControlPlane(ctx context.Context, fabric *netns.NS) error {
	f, ok := c.CP.(*File)
	if !ok {
		return fmt.Errorf("lab %s: only the embedded control plane runs as a daemon", c.Names.Lab)
	}
	argv := []string{c.Info.Binary, "lab", "control-plane", "--name", c.Names.Lab}
	pod := agentPod(ControlPlanePod, "embedded control plane", "control-plane", svcnetImage, "", argv)
	if err := c.recordAgentPod(ctx, pod); err != nil {
		return err
	}
	log := c.Names.Path("logs", "control-plane.log")
	sup, err := c.StartSupervised(fabric, log, Supervision{Pod: pod, Argv: argv})
	if err != nil {
		return err
	}
	sock := ControlPlaneSocket(c.Names)
	err = waitAgent(ctx, "the control-plane daemon", sock, sup, log, controlPlaneReady, 20*time.Millisecond, func() error {
		conn, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
	if err != nil {
		return err
	}
	f.Attach(sock)
	return c.AgentRunning(ctx, pod, c.Info.Stack().Gateways()[0])
}

// ErrAgentPod refuses to apply or delete the Pod of one of the lab's agents.
func ErrAgentPod(p *corev1.Pod) error {
	return fmt.Errorf("Pod %s/%s: runs the lab's %s; it comes and goes with the lab (svcnet lab up, down)", p.Namespace, p.Name, p.Annotations[AgentAnnotation])
}

package cluster

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// The command lines of every process the lab runs, built here from the lab's
// typed settings (Info) and where the process runs: each node's svcnet proxy
// and kube-proxy and their cleanup, the LoadBalancer controller, a pod's
// svcnet echo or svcnet dns, and the supervisor around each of them.

// svcnetProxyArgv is node i's svcnet proxy command line: state are the flags
// naming the control plane, keyFile the lab's heartbeat key file. Every one
// runs the pod routes and the layer-2 speaker, so the pool's IPs are answered
// for on the node network. Beside kube-proxy it programs no Service
// (--data-plane none) and moves its health and metrics off kube-proxy's
// ports; else info.DataPlane, when set, is its --data-plane, and the eBPF
// plane gets --cgroup, the node's cgroup (see proxyNeedsCgroup), and
// --bpf-pin-dir, its directory in the lab's BPF filesystem.
// info.ProxyArgs come last, so they may override any of these.
func svcnetProxyArgv(info *Info, state []string, i int, keyFile string) []string {
	argv := append([]string{info.Binary, "proxy"}, state...)
	argv = append(argv, "--hostname-override", topology.NodeName(i), "--pod-routes",
		"--cluster-cidr", topology.Join(info.Stack().PodNetworks()), "--announce", "l2", "--announce-key-file", keyFile, "--v", "1")
	switch {
	case kubeProxyMode(info.Proxy) != "":
		argv = append(argv, "--data-plane", "none",
			"--healthz-bind-address", fmt.Sprintf("0.0.0.0:%d", helperHealthzPort), "--metrics-bind-address", helperMetricsAddr)
	case info.DataPlane != "":
		argv = append(argv, "--data-plane", info.DataPlane)
	}
	if proxyNeedsCgroup(info) {
		n := topology.Names{Lab: info.Name}
		argv = append(argv, "--cgroup", n.NodeCgroupPath(i), "--bpf-pin-dir", n.NodeBPFDir(i))
	}
	return append(argv, info.ProxyArgs...)
}

// ProxyPins reports whether the lab's proxies pin their BPF objects in the
// lab's BPF filesystem (topology.MountBPFFS): those of the eBPF plane.
func ProxyPins(info *Info) bool { return proxyNeedsCgroup(info) }

// DataPlaneEBPF is svcnet proxy's eBPF data plane: it translates the connects
// of the processes in the cgroup named by the proxy's --cgroup.
const DataPlaneEBPF = ebpfplane.Name

// proxyNeedsCgroup reports whether a node's svcnet proxy runs the eBPF plane
// and so is given its node's cgroup, the one every process of the node
// starts in, by its cgroup v2 path (topology.Names.NodeCgroupPath): under
// `ip netns exec` the proxy's /sys is a fresh sysfs without the host's
// cgroup mounts, and the proxy finds the hierarchy itself.
func proxyNeedsCgroup(info *Info) bool {
	return info.DataPlane == DataPlaneEBPF && kubeProxyMode(info.Proxy) == ""
}

// kubeProxyPath is upstream kube-proxy's path, in info.K8sBin.
func kubeProxyPath(info *Info) string { return filepath.Join(info.K8sBin, kubeProxyBinary) }

// kubeProxyArgv is node i's upstream kube-proxy command line (state are the
// flags naming the control plane), in info.Proxy's mode. NodePorts are
// served on the node's primary address, as svcnet proxy does by default.
func kubeProxyArgv(info *Info, state []string, i int) []string {
	argv := append([]string{kubeProxyPath(info)}, state...)
	return append(argv, "--proxy-mode", kubeProxyMode(info.Proxy), "--hostname-override", topology.NodeName(i),
		"--cluster-cidr", topology.Join(info.Stack().PodNetworks()), "--nodeport-addresses", kubeProxyNodePortAddrs, kubeProxyConntrackFlags,
		"--healthz-bind-address", fmt.Sprintf("0.0.0.0:%d", kubeProxyHealthzPort), "--metrics-bind-address", kubeProxyMetricsAddr,
		kubeProxyVerbosity)
}

// cleanupArgv removes the rules the node proxy proxy left on a node:
// svcnet proxy --cleanup, or kube-proxy --cleanup.
func cleanupArgv(info *Info, proxy string) []string {
	if kubeProxyMode(proxy) != "" {
		return []string{kubeProxyPath(info), "--cleanup", "--v=1"}
	}
	return []string{info.Binary, "proxy", "--cleanup"}
}

// lbControllerArgv is `svcnet lb controller` on the kube control plane at
// kubeconfig.
func lbControllerArgv(info *Info, kubeconfig string) []string {
	return []string{info.Binary, "lb", "controller", "--kubeconfig", kubeconfig, "--v", "1"}
}

// EchoArgv is the command line of a pod's `svcnet echo`, serving every
// containerPort by protocol (ServerPorts) and naming the pod, its node and
// ip in its replies.
func (c *Cluster) EchoArgv(pod *corev1.Pod, ip netip.Addr) []string {
	tcp, udp := ServerPorts(pod)
	argv := []string{c.Info.Binary, "echo", "--name", pod.Name, "--node", pod.Spec.NodeName, "--pod-ip", ip.String()}
	for _, p := range tcp {
		argv = append(argv, "--tcp", strconv.Itoa(int(p)))
	}
	for _, p := range udp {
		argv = append(argv, "--udp", strconv.Itoa(int(p)))
	}
	return argv
}

// DNSArgv is a DNS pod's command line: svcnet dns from the state the proxies
// read (the published cluster.yaml, or the kubeconfig), on port and, for
// metrics, metricsPort of every address of the pod.
func (c *Cluster) DNSArgv(port, metricsPort int) []string {
	argv := append([]string{c.Info.Binary, "dns"}, c.CP.ProxyArgs()...)
	return append(argv, "--listen", fmt.Sprintf(":%d", port),
		"--metrics-bind-address", fmt.Sprintf(":%d", metricsPort))
}

// ServerPorts are the ports a pod's server listens on: every containerPort, by
// protocol (SCTP is served as nothing: svcnet echo has no SCTP server).
func ServerPorts(pod *corev1.Pod) (tcp, udp []int32) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			switch p.Protocol {
			case corev1.ProtocolUDP:
				udp = append(udp, p.ContainerPort)
			case corev1.ProtocolTCP, "":
				tcp = append(tcp, p.ContainerPort)
			}
		}
	}
	slices.Sort(tcp)
	slices.Sort(udp)
	return slices.Compact(tcp), slices.Compact(udp)
}

// supervisorArgv is the command line of s's supervisor: `svcnet lab
// supervise`, its flags, `--`, and the child's argv.
func (c *Cluster) supervisorArgv(s Supervision) []string {
	argv := []string{c.Info.Binary, "lab", "supervise", "--name", c.Names.Lab, "--pod", s.Pod.Namespace + "/" + s.Pod.Name}
	if kc, ok := c.CP.(*Kube); ok {
		argv = append(argv, "--kubeconfig", kc.c.Kubeconfig)
	}
	for _, r := range s.Readiness {
		argv = append(argv, "--readiness", r)
	}
	if s.Node != "" {
		argv = append(argv, "--node", s.Node)
	}
	if s.stateFile != "" {
		argv = append(argv, "--state-file", s.stateFile)
	}
	return append(append(argv, "--"), s.Argv...)
}

package topology

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
)

// A pod's sandbox, as a container runtime makes it: a network namespace of
// its own (Names.Pod), wired on its node by svcnet's CNI plugin (cni.go), the
// files `ip netns exec` binds over /etc for it, and a UTS namespace with its
// host name for every process run in it (PodCommand).

// WirePod makes pod's sandbox on its node (spec.nodeName) in a lab of stack
// s: its network namespace, its eth0 from the CNI plugin, and its /etc files. A sandbox
// left over from a failed attempt is removed first (UnwirePod). It returns
// the pod's namespace, open (the caller closes it), and its addresses.
func WirePod(ctx context.Context, n Names, s Stack, pod *corev1.Pod) (*netns.NS, []netip.Addr, error) {
	id := pod.Namespace + "/" + pod.Name
	nsName := n.Pod(pod.Namespace, pod.Name)
	if netns.Exists(nsName) { // left over from a failed attempt
		if err := UnwirePod(ctx, n, pod); err != nil {
			return nil, nil, err
		}
	}
	nodeNS, err := netns.Open(n.Node(NodeIndex(pod.Spec.NodeName)))
	if err != nil {
		return nil, nil, fmt.Errorf("Pod %s: node %s: %w", id, pod.Spec.NodeName, err)
	}
	defer nodeNS.Close()
	podNS, err := netns.Create(nsName)
	if err != nil {
		return nil, nil, fmt.Errorf("Pod %s: %w", id, err)
	}
	rt := cniRuntime{names: n, node: pod.Spec.NodeName, ns: nodeNS}
	ips, err := rt.add(ctx, pod, nsName)
	if err != nil {
		podNS.Close()
		return nil, nil, err
	}
	if err := writePodEtc(nsName, pod, ips[0], s.ClusterDNS()); err != nil {
		podNS.Close()
		return nil, nil, fmt.Errorf("Pod %s: %w", id, err)
	}
	return podNS, ips, nil
}

// UnwirePod stops the processes in pod's sandbox, unwires it (CNI DEL) and
// removes its namespace and /etc files. It succeeds when there is nothing
// left.
func UnwirePod(ctx context.Context, n Names, pod *corev1.Pod) error {
	nsName := n.Pod(pod.Namespace, pod.Name)
	var errs []error
	errs = append(errs, StopNamespaceProcesses(nsName, 5*time.Second))
	if i := NodeIndex(pod.Spec.NodeName); i > 0 {
		if nodeNS, err := netns.Open(n.Node(i)); err == nil {
			errs = append(errs, cniRuntime{names: n, node: pod.Spec.NodeName, ns: nodeNS}.del(ctx, pod, nsName))
			nodeNS.Close()
		}
	}
	if netns.Exists(nsName) {
		errs = append(errs, netns.DeleteNamed(nsName))
	}
	errs = append(errs, os.RemoveAll(filepath.Join(EtcNetns, nsName)))
	return errors.Join(errs...)
}

// writePodEtc writes the files `ip netns exec` binds over /etc for the pod: the
// cluster DNS resolvers dns as the kubelet configures them (ClusterFirst), its
// host name, and /etc/hosts naming it.
func writePodEtc(nsName string, pod *corev1.Pod, ip netip.Addr, dns []netip.Addr) error {
	dir := filepath.Join(EtcNetns, nsName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"resolv.conf": ClusterResolvConf(pod.Namespace, dns),
		"hostname":    PodHostname(pod) + "\n",
		"hosts":       fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", ip, PodHostname(pod)),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// PodCommand runs argv in a UTS namespace of its own whose host name is the
// pod's (PodHostname), so that `hostname` in a pod says what it says in
// Kubernetes.
func PodCommand(hostname string, argv ...string) []string {
	return append([]string{"unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$@"`, hostname}, argv...)
}

// hostnameMax is the longest host name: HOST_NAME_MAX, 64 bytes with the
// terminating NUL.
const hostnameMax = 63

// PodHostname is the host name a pod sees, as the kubelet gives it: its
// spec.hostname, else its name, cut to 63 bytes without a trailing '-' or '.'
// (a Pod name may be 253 bytes; sethostname refuses more than 64).
func PodHostname(pod *corev1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > hostnameMax {
		h = strings.TrimRight(h[:hostnameMax], "-.")
	}
	return h
}

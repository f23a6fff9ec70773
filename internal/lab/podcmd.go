package lab

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
)

// podArgv is the command line of a pod's one process, chosen by its images (a
// lab pod runs svcnet, never a container image): a pod with a container of
// DNSImage runs `svcnet dns` (dnsArgv); any other runs `svcnet echo`, serving
// every containerPort by protocol and naming the pod, its node and ip in its
// replies.
func (l *Lab) podArgv(pod *corev1.Pod, ip netip.Addr) []string {
	if isDNSPod(pod) {
		return l.dnsArgv()
	}
	tcp, udp := serverPorts(pod)
	argv := []string{l.info.Binary, "echo", "--name", pod.Name, "--node", pod.Spec.NodeName, "--pod-ip", ip.String()}
	for _, p := range tcp {
		argv = append(argv, "--tcp", strconv.Itoa(int(p)))
	}
	for _, p := range udp {
		argv = append(argv, "--udp", strconv.Itoa(int(p)))
	}
	return argv
}

// hostnameMax is the longest host name: HOST_NAME_MAX, 64 bytes with the
// terminating NUL.
const hostnameMax = 63

// podHostname is the host name a pod sees, as the kubelet gives it: its
// spec.hostname, else its name, cut to 63 bytes without a trailing '-' or '.'
// (a Pod name may be 253 bytes; sethostname refuses more than 64).
func podHostname(pod *corev1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > hostnameMax {
		h = strings.TrimRight(h[:hostnameMax], "-.")
	}
	return h
}

// waitPodReady waits until the pod's process (supervised by sup) serves on
// ip: every TCP containerPort accepts (bounded by readyTimeout), and a DNS pod
// also answers a query from synced state (bounded by dnsReadyTimeout). It
// fails at once, with the end of the log, when a DNS pod's process exits.
func (l *Lab) waitPodReady(ctx context.Context, ns *netns.NS, pod *corev1.Pod, ip netip.Addr, sup int, logPath string) error {
	tcp, _ := serverPorts(pod)
	if err := waitListening(ctx, ns, ip, tcp); err != nil {
		return err
	}
	if !isDNSPod(pod) {
		return nil
	}
	w := newChildWatch(sup, logPath)
	gone := func() error {
		if w.ended() {
			return fmt.Errorf("svcnet dns exited:\n%s", logTail(logPath, 10))
		}
		return nil
	}
	name := fmt.Sprintf("%s.%s.svc.%s.", DNSService, DNSNamespace, DNSZone)
	server := netip.AddrPortFrom(ip, dnsPort)
	if err := pollDNS(ctx, dnsReadyTimeout, netns.Dialer(ns), server, name, synced, gone); err != nil {
		return fmt.Errorf("svcnet dns at %s: %w", server, err)
	}
	return nil
}

package lab

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// waitPodReady waits until the pod's process (supervised by sup) serves on
// ip: every TCP containerPort accepts (bounded by readyTimeout), and a DNS pod
// also answers a query from synced state (bounded by dnsReadyTimeout). It
// fails at once, with the end of the log, when a DNS pod's process exits.
func (l *Lab) waitPodReady(ctx context.Context, ns *netns.NS, pod *corev1.Pod, ip netip.Addr, sup int, logPath string) error {
	tcp, _ := cluster.ServerPorts(pod)
	if err := waitListening(ctx, ns, ip, tcp); err != nil {
		return err
	}
	if !isDNSPod(pod) {
		return nil
	}
	w := cluster.NewChildWatch(sup, logPath)
	gone := func() error {
		if w.Ended() {
			return fmt.Errorf("svcnet dns exited:\n%s", topology.LogTail(logPath, 10))
		}
		return nil
	}
	name := fmt.Sprintf("%s.%s.svc.%s.", DNSService, DNSNamespace, topology.DNSZone)
	server := netip.AddrPortFrom(ip, dnsPort)
	if err := pollDNS(ctx, dnsReadyTimeout, netns.Dialer(ns), server, name, ipfamily.Of(ip), synced, gone); err != nil {
		return fmt.Errorf("svcnet dns at %s: %w", server, err)
	}
	return nil
}

// podArgv is the command line of a pod's one process, chosen by its images (a
// lab pod runs svcnet, never a container image): a pod with a container of
// DNSImage runs `svcnet dns`; any other runs `svcnet echo`, serving every
// containerPort by protocol and naming the pod, its node and ip in its
// replies.
func (l *Lab) podArgv(pod *corev1.Pod, ip netip.Addr) []string {
	if isDNSPod(pod) {
		return l.c.DNSArgv(dnsPort, dnsMetricsPort)
	}
	return l.c.EchoArgv(pod, ip)
}

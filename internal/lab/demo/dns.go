package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// clusterDNS shows a pod resolving my-nginx by its short name: `svcnet resolve`
// in the pod reads its resolv.conf (nameserver 10.96.0.10, search
// default.svc.cluster.local ..., ndots:5), and the query crosses the pod's node's
// proxy to the svcnet-dns pod behind kube-system/kube-dns. The answer must be the
// Service's ClusterIP.
func (d *demo) clusterDNS(ctx context.Context, l *lab.Lab, from lab.Place, svc *corev1.Service) error {
	d.say("From pod %s, resolve my-nginx by its short name: the pod's resolv.conf sends the query to the cluster DNS %s (kube-system/kube-dns, served by svcnet dns in pod %s/%s on %s), through its node's proxy like any Service traffic.",
		from.Pod.Name, topology.ClusterDNS, lab.DNSNamespace, lab.DNSPod, topology.NodeName(1))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := l.CommandContext(ctx, from, l.Info().Binary, "resolve", "my-nginx")
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	fmt.Fprintf(d.out, "    $ svcnet resolve my-nginx\n    %s\n", strings.ReplaceAll(text, "\n", "\n    "))
	d.check(err == nil && text == svc.Spec.ClusterIP, "my-nginx resolves to its ClusterIP %s", svc.Spec.ClusterIP)
	return nil
}

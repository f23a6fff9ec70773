package node

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

// TestBesideKubeProxy is deploy/proxy/beside-kube-proxy on real nodes whose
// Services are upstream kube-proxy's (nftables mode, with CoreDNS and
// svcnet's CNI: deployUpstream): `kubectl apply -k` of the directory as it
// is, then a Service labelled service.kubernetes.io/service-proxy-name=svcnet
// is served by svcnet and only by svcnet, an unlabelled one by kube-proxy
// and only by kube-proxy, both reached from Pods on every node and through
// their NodePorts from outside the cluster.
func TestBesideKubeProxy(t *testing.T) {
	nodetest.RequireTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := nodetest.Up(t, ctx, nodecluster.Options{Images: allImages(t)})
	deployUpstream(t, ctx, c)
	kubectl(t, ctx, c, "apply", "-k", repoPath(t, "deploy/proxy/beside-kube-proxy"))
	rollout(t, ctx, c, "daemonset/svcnet-proxy-beside")

	pods := deployAcrossNodes(t, ctx, c)
	if len(pods) != len(c.Nodes) {
		t.Fatalf("%d Pods running, want one per node", len(pods))
	}
	mine := nodePortService(t, ctx, c, "by-svcnet", map[string]string{"service.kubernetes.io/service-proxy-name": "svcnet"})
	theirs := nodePortService(t, ctx, c, "by-kube-proxy", nil)
	for _, svc := range []*corev1.Service{mine, theirs} {
		t.Run(svc.Name, func(t *testing.T) {
			dialFromPods(t, ctx, c, pods, svc.Spec.ClusterIP, 80)
			answeredFromOutside(t, ctx, c, c.Nodes[0].Addr.String(), int(svc.Spec.Ports[0].NodePort), pods)
		})
	}
	t.Run("who-programs-what", func(t *testing.T) {
		for _, n := range c.Nodes {
			for _, tc := range []struct{ table, has, hasNot string }{
				{"svcnet", mine.Spec.ClusterIP, theirs.Spec.ClusterIP},
				{"kube-proxy", theirs.Spec.ClusterIP, mine.Spec.ClusterIP},
			} {
				cmd, err := c.NodeCommand(ctx, n.Name, "nft", "list", "table", "ip", tc.table)
				if err != nil {
					t.Fatal(err)
				}
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("%s: nft list table ip %s: %v: %s", n.Name, tc.table, err, out)
					continue
				}
				if !strings.Contains(string(out), tc.has+" ") || strings.Contains(string(out), tc.hasNot+" ") {
					t.Errorf("%s: table ip %s: want %s and not %s in it:\n%s", n.Name, tc.table, tc.has, tc.hasNot, out)
				}
			}
		}
	})
}

// nodePortService creates Service default/NAME with labels, a NodePort over
// the netexec Pods (port 80 → netexecPort).
func nodePortService(t *testing.T, ctx context.Context, c *nodecluster.Cluster, name string, labels map[string]string) *corev1.Service {
	t.Helper()
	svc, err := c.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "netexec"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(netexecPort), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s: %v", name, err)
	}
	return svc
}

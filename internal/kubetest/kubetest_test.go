package kubetest

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestRepoRoot(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root + "/tools/k8s/build.sh"); err != nil {
		t.Fatalf("repo root %s: %v", root, err)
	}
}

// TestAPIServerRestart starts a control plane, checks default/kubernetes, the
// kubeconfig file and a restart of the apiserver on the same port and etcd.
func TestAPIServerRestart(t *testing.T) {
	env := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var svc *corev1.Service
	Eventually(t, 30*time.Second, "default/kubernetes", func() (bool, string) {
		s, err := env.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		svc = s
		return true, ""
	})
	if svc.Spec.ClusterIP != "10.96.0.1" {
		t.Errorf("default/kubernetes clusterIP = %q, want 10.96.0.1", svc.Spec.ClusterIP)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	fromFile := kubernetes.NewForConfigOrDie(cfg)
	if _, err := fromFile.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("client from kubeconfig file: %v", err)
	}

	CreateNamespace(t, env.Client, "before")
	env.StopAPIServer()
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, "before", metav1.GetOptions{}); err == nil {
		t.Fatal("apiserver answered while stopped")
	}
	env.StartAPIServer()
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("after restart (same client): %v", err)
	}
	env.KillAPIServer()
	env.StartAPIServer()
	if _, err := fromFile.CoreV1().Namespaces().Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("after kill and restart (kubeconfig client): %v", err)
	}
}

// TestEndpointSlicesFromPods checks the controller manager and the object helpers
// together: a ready Pod on a Node becomes an endpoint of its Service's slice.
func TestEndpointSlicesFromPods(t *testing.T) {
	env := Start(t, Options{ControllerManager: true})
	c := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	node := CreateNode(t, c, Node{Name: "node1", InternalIPs: []string{"172.26.236.177"}, PodCIDRs: []string{"192.168.1.0/24"}, Ready: true})
	if len(node.Status.Addresses) == 0 || !slices.Equal(node.Spec.PodCIDRs, []string{"192.168.1.0/24"}) {
		t.Fatalf("node as stored: spec %+v status %+v", node.Spec, node.Status)
	}
	CreateNamespace(t, c, "ns1")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{
			Name: "c", Image: "none", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
	if _, err := c.CoreV1().Pods("ns1").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	SetPodStatus(t, c, "ns1", "web", true, "192.168.1.10")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := c.CoreV1().Services("ns1").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	Eventually(t, 60*time.Second, "an EndpointSlice with the ready pod", func() (bool, string) {
		l, err := c.DiscoveryV1().EndpointSlices("ns1").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err.Error()
		}
		for _, sl := range l.Items {
			for _, ep := range sl.Endpoints {
				ready := ep.Conditions.Ready != nil && *ep.Conditions.Ready
				if slices.Contains(ep.Addresses, "192.168.1.10") && ready && len(sl.Ports) == 1 && *sl.Ports[0].Port == 8080 {
					return true, ""
				}
			}
		}
		return false, "slices: " + summarize(l.Items)
	})
}

func summarize(items []discoveryv1.EndpointSlice) string {
	s := ""
	for _, sl := range items {
		s += sl.Name + ":"
		for _, ep := range sl.Endpoints {
			s += " " + ep.Addresses[0]
		}
		s += "; "
	}
	return s
}

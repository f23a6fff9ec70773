package kube

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// buildSvcnet builds the svcnet binary for a test that runs it as a user would.
func buildSvcnet(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "svcnet")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/svcnet").CombinedOutput()
	if err != nil {
		t.Fatalf("building svcnet: %v\n%s", err, out)
	}
	return bin
}

// TestGetFromCluster runs `svcnet get` against a real apiserver: the tables and the
// json list show what the apiserver allocated.
func TestGetFromCluster(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	bin := buildSvcnet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The apiserver creates default/kubernetes shortly after it is ready.
	kubetest.Eventually(t, 30*time.Second, "default/kubernetes", func() (bool, string) {
		_, err := env.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	svc, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "my-nginx"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"run": "my-nginx"},
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "get", "services", "--kubeconfig", env.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("svcnet get: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`(?m)^my-nginx\s+LoadBalancer\s+` + regexp.QuoteMeta(svc.Spec.ClusterIP) + `\s+<pending>\s+80:` +
		regexp.QuoteMeta(itoa(svc.Spec.Ports[0].NodePort)) + `/TCP\s+\S+\s*$`)
	if !line.Match(out) || !strings.Contains(string(out), "kubernetes") {
		t.Fatalf("svcnet get services:\n%s\nwant a my-nginx line with %s and node port %d", out, svc.Spec.ClusterIP, svc.Spec.Ports[0].NodePort)
	}
	out, err = exec.CommandContext(ctx, bin, "get", "svc", "-A", "-o", "json", "--kubeconfig", env.Kubeconfig).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"kind": "List"`) || !strings.Contains(string(out), `"uid": "`+string(svc.UID)+`"`) {
		t.Fatalf("svcnet get -o json: %v\n%s", err, out)
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

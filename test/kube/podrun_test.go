package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/testbin"
)

// waitNamespace waits for the apiserver to have created namespace (kube-system
// appears a moment after it is ready).
func waitNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, namespace string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "namespace "+namespace, func() (bool, string) {
		_, err := c.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// createAll creates objs, objects read from a component's manifests, in
// order, and fails t naming the first one the apiserver refuses.
func createAll(ctx context.Context, t *testing.T, c kubernetes.Interface, objs ...any) {
	t.Helper()
	opts := metav1.CreateOptions{}
	for _, o := range objs {
		var err error
		var what string
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			what = "ServiceAccount " + o.Name
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		case *corev1.Service:
			what = "Service " + o.Name
			_, err = c.CoreV1().Services(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.ClusterRole:
			what = "ClusterRole " + o.Name
			_, err = c.RbacV1().ClusterRoles().Create(ctx, o, opts)
		case *rbacv1.ClusterRoleBinding:
			what = "ClusterRoleBinding " + o.Name
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
		case *rbacv1.Role:
			what = "Role " + o.Name
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.RoleBinding:
			what = "RoleBinding " + o.Name
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
		default:
			t.Fatalf("createAll: no client for %T", o)
		}
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
}

// podCredentials gives ns what a Pod of ServiceAccount namespace/name has for
// client-go's in-cluster configuration: a token of that ServiceAccount and
// the apiserver's CA in a directory (runInPod mounts it at
// /var/run/secrets/kubernetes.io/serviceaccount), and
// KUBERNETES_SERVICE_HOST/PORT naming a forward, inside ns, to the
// apiserver. It returns the environment and the directory.
func podCredentials(ctx context.Context, t *testing.T, env *kubetest.Env, ns *netns.NS, namespace, name string) (podEnv []string, secrets string) {
	t.Helper()
	tok, err := env.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", namespace, name, err)
	}
	apiserver, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := netns.Forward(ctx, ns, "127.0.0.1:0", apiserver.Host)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(fwd)
	secrets = t.TempDir()
	for file, b := range map[string][]byte{"token": []byte(tok.Status.Token), "ca.crt": env.Config.CAData} {
		if err := os.WriteFile(filepath.Join(secrets, file), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port}, secrets
}

// waitReady waits for container's readiness probe (an HTTP GET on the Pod's
// address, here loopback in ns) to answer 200, as the kubelet probes it.
func waitReady(t *testing.T, proc *podProcess, ns *netns.NS, container corev1.Container) {
	t.Helper()
	probe := container.ReadinessProbe.HTTPGet
	healthz := fmt.Sprintf("http://127.0.0.1:%d%s", containerPort(container, probe.Port), probe.Path)
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}, Timeout: 2 * time.Second}
	waitFor(t, proc, "readiness probe GET "+healthz, func() error {
		resp, err := hc.Get(healthz)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	})
}

// startForPod builds svcnet (the image's binary), starts a control plane
// and waits for namespace; it returns the binary, the control plane and a
// context bounding the test's waits, cancelled when the test ends.
func startForPod(t *testing.T, namespace string) (bin string, env *kubetest.Env, ctx context.Context) {
	t.Helper()
	bin = filepath.Join(t.TempDir(), "svcnet")
	if err := testbin.Build(bin); err != nil {
		t.Fatal(err)
	}
	env = kubetest.Start(t, kubetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	waitNamespace(ctx, t, env.Client, namespace)
	return bin, env, ctx
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	deploylb "github.com/svcnet/svcnet/deploy/lb"
	"github.com/svcnet/svcnet/internal/kubetest"
)

// lbControllerFlags are the flags `svcnet lb controller` must have.
var lbControllerFlags = []string{
	"--kubeconfig", "--lb-class", "--default-class", "--resync-period",
	"--leader-elect", "--leader-elect-namespace", "--leader-elect-lease-name",
	"--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period",
	"--metrics-bind-address", "--service-cluster-ip-range", "-v,",
}

func TestLBControllerHelp(t *testing.T) {
	out, errOut, code := run(t, "lb", "controller", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, f := range lbControllerFlags {
		if !strings.Contains(out, f) {
			t.Errorf("--help lacks %s:\n%s", f, out)
		}
	}
	for _, def := range []string{`"svcnet.io/lb"`, `"kube-system"`, `"svcnet-lb-controller"`, "15s", "10s", "2s", `":10251"`} {
		if !strings.Contains(out, def) {
			t.Errorf("--help does not show the default %s:\n%s", def, out)
		}
	}
	out, _, code = run(t, "lb", "--help")
	if code != 0 || !strings.Contains(out, "controller") {
		t.Errorf("svcnet lb --help (exit %d) does not list controller:\n%s", code, out)
	}
}

// TestLBControllerDeployArgs: deploy/lb/controller.yaml's command line parses
// with the command's own flags.
func TestLBControllerDeployArgs(t *testing.T) {
	b, err := os.ReadFile("../../deploy/lb/controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(b, &d); err != nil {
		t.Fatalf("controller.yaml: %v", err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	argv := append(slices.Clone(c.Command), c.Args...)
	if len(argv) < 3 || !slices.Equal(argv[:3], []string{"svcnet", "lb", "controller"}) {
		t.Fatalf("command %q, want svcnet lb controller ...", argv)
	}
	cmd := newLBControllerCommand()
	if err := cmd.ParseFlags(argv[3:]); err != nil {
		t.Fatalf("controller.yaml's flags %q: %v", argv[3:], err)
	}
	if rest := cmd.Flags().Args(); len(rest) > 0 {
		t.Errorf("controller.yaml passes arguments %q, which the command refuses", rest)
	}
}

func TestParseCIDRList(t *testing.T) {
	got, err := parseCIDRList(" 10.96.0.1/12, fd00:96::/108 ,")
	if err != nil || fmt.Sprint(got) != "[10.96.0.0/12 fd00:96::/108]" {
		t.Errorf("parseCIDRList = %v, %v", got, err)
	}
	if got, err := parseCIDRList(""); err != nil || len(got) != 0 {
		t.Errorf(`parseCIDRList("") = %v, %v`, got, err)
	}
	if _, err := parseCIDRList("10.96.0.0"); err == nil {
		t.Error("an address without a length is accepted")
	}
	if _, _, code := run(t, "lb", "controller", "--service-cluster-ip-range", "nope", "--kubeconfig", "/nonexistent"); code == 0 {
		t.Error("a bad --service-cluster-ip-range exits 0")
	}
}

func TestLBControllerLeaderElectionFlags(t *testing.T) {
	for _, tc := range []struct {
		lease, renew, retry time.Duration
		ok                  bool
	}{
		{15 * time.Second, 10 * time.Second, 2 * time.Second, true},
		{10 * time.Second, 10 * time.Second, 2 * time.Second, false},
		{15 * time.Second, 2 * time.Second, 2 * time.Second, false},
		{15 * time.Second, 10 * time.Second, 0, false},
	} {
		o := &lbControllerOptions{leNamespace: "kube-system", leName: "x", leaseDuration: tc.lease, renewDeadline: tc.renew, retryPeriod: tc.retry}
		le, err := o.leaderElection()
		if (err == nil) != tc.ok {
			t.Errorf("lease %v renew %v retry %v: err %v, want ok=%v", tc.lease, tc.renew, tc.retry, err, tc.ok)
			continue
		}
		if err != nil {
			continue
		}
		host, _ := os.Hostname()
		suffix, ok := strings.CutPrefix(le.Identity, host+"_")
		if !ok || len(suffix) < 8 {
			t.Errorf("identity %q, want %s_ and a random suffix", le.Identity, host)
		}
		if other, _ := o.leaderElection(); other.Identity == le.Identity {
			t.Errorf("two calls gave the same identity %q", le.Identity)
		}
	}
}

// TestLBControllerCommand (kube tier) runs `svcnet lb controller` in-process
// against a real apiserver: it takes the lease, assigns a LoadBalancer Service
// the pool's first address, serves /healthz and /metrics, and exits cleanly
// when its context ends.
func TestLBControllerCommand(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installPoolCRD(ctx, t, dyn)
	kubetest.CreateNamespace(t, env.Client, "ns1")
	poolGVR := schema.GroupVersionResource{Group: "svcnet.io", Version: "v1alpha1", Resource: "ipaddresspools"}
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "svcnet.io/v1alpha1", "kind": "IPAddressPool",
		"metadata": map[string]any{"name": "lab"},
		"spec":     map[string]any{"addresses": []any{"172.26.236.180-172.26.236.199"}},
	}}
	if _, err := dyn.Resource(poolGVR).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pool: %v", err)
	}
	metricsAddr := freeAddr(t)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		cmd := newRootCommand()
		cmd.SetArgs([]string{"lb", "controller", "--kubeconfig", env.Kubeconfig, "--leader-elect-namespace", "ns1",
			"--leader-elect-lease-name", "lb-cmd-test", "--metrics-bind-address", metricsAddr})
		cmd.SetOut(io.Discard)
		cmd.SetErr(&stderr)
		done <- cmd.ExecuteContext(runCtx)
	}()

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := env.Client.CoreV1().Services("ns1").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	kubetest.Eventually(t, 30*time.Second, "ns1/web ingress 172.26.236.180", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("svcnet lb controller exited: %v\n%s", err, stderr.String())
		default:
		}
		s, err := env.Client.CoreV1().Services("ns1").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		in := s.Status.LoadBalancer.Ingress
		return len(in) == 1 && in[0].IP == "172.26.236.180", fmt.Sprintf("ingress %+v", in)
	})
	if l, err := env.Client.CoordinationV1().Leases("ns1").Get(ctx, "lb-cmd-test", metav1.GetOptions{}); err != nil || l.Spec.HolderIdentity == nil {
		t.Errorf("lease ns1/lb-cmd-test: %v, %+v", err, l)
	}
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/metrics": `svcnet_lb_pool_addresses{pool="lab",state="used"} 1`,
	} {
		body := httpGet(t, "http://"+metricsAddr+path)
		if !strings.Contains(body, want) {
			t.Errorf("GET %s lacks %q:\n%s", path, want, body)
		}
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("svcnet lb controller did not exit after cancel")
	}
}

// installPoolCRD creates deploy/lb/crd.yaml and waits until pools are served.
func installPoolCRD(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	var obj map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(deploylb.CRD), 4096).Decode(&obj); err != nil {
		t.Fatalf("crd.yaml: %v", err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	pools := dyn.Resource(schema.GroupVersionResource{Group: "svcnet.io", Version: "v1alpha1", Resource: "ipaddresspools"})
	kubetest.Eventually(t, 30*time.Second, "ipaddresspools served", func() (bool, string) {
		_, err := pools.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// httpGet returns the body of GET url, retrying (bounded) while the server
// starts.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	var lastErr error
	for range 50 {
		resp, err := client.Get(url)
		if err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				return string(b)
			}
			lastErr = fmt.Errorf("status %d, %v", resp.StatusCode, err)
		} else {
			lastErr = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", url, lastErr)
	return ""
}

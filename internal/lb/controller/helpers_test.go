package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	deploylb "github.com/svcnet/svcnet/deploy/lb"
	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

const (
	// waitTimeout bounds every wait for the controller to act.
	waitTimeout = 30 * time.Second
	// stopTimeout bounds the wait for Run or RunLeaderElected to return.
	stopTimeout = 30 * time.Second
	// testNS is the namespace the tests' Services live in.
	testNS = "ns1"
)

// lbEnv is a control plane with the IPAddressPool CRD installed and namespace
// ns1 created.
type lbEnv struct {
	*kubetest.Env
	dyn dynamic.Interface
}

// startEnv starts kube-apiserver (kube tier) and installs deploy/lb/crd.yaml.
func startEnv(t *testing.T) *lbEnv {
	t.Helper()
	env := kubetest.Start(t, kubetest.Options{})
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	e := &lbEnv{Env: env, dyn: dyn}
	installCRD(t, dyn)
	kubetest.CreateNamespace(t, env.Client, testNS)
	return e
}

// installCRD creates the IPAddressPool CRD and waits until it is Established
// and its resource is served.
func installCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	ctx := apiCtx(t)
	if _, err := kubecluster.InstallCRD(ctx, dyn, deploylb.CRD, waitTimeout); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, waitTimeout, "ipaddresspools served", func() (bool, string) {
		_, err := dyn.Resource(poolGVR).List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// apiCtx is a context for the test's own API calls, cancelled at its end.
func apiCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// createPool creates the l2 IPAddressPool name with addresses.
func (e *lbEnv) createPool(t *testing.T, name string, addresses ...string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pool.SchemeGroupVersion.String(),
		"kind":       pool.Kind,
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"addresses": toAny(addresses)},
	}}
	if _, err := e.dyn.Resource(poolGVR).Create(apiCtx(t), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create IPAddressPool %s: %v", name, err)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// createService creates the TCP/80 LoadBalancer Service ns1/name, of
// loadBalancerClass class ("" for none).
func (e *lbEnv) createService(t *testing.T, name, class string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	if class != "" {
		svc.Spec.LoadBalancerClass = ptr.To(class)
	}
	got, err := e.Client.CoreV1().Services(testNS).Create(apiCtx(t), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", testNS, name, err)
	}
	return got
}

func (e *lbEnv) getService(t *testing.T, name string) *corev1.Service {
	t.Helper()
	svc, err := e.Client.CoreV1().Services(testNS).Get(apiCtx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get service %s/%s: %v", testNS, name, err)
	}
	return svc
}

// ips returns the Service's status.loadBalancer.ingress IPs.
func ips(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// waitIPs waits until Service ns1/name has exactly the ingress IPs want (none
// for an empty want).
func (e *lbEnv) waitIPs(t *testing.T, name string, want ...string) *corev1.Service {
	t.Helper()
	var svc *corev1.Service
	kubetest.Eventually(t, waitTimeout, fmt.Sprintf("service %s/%s ingress %v", testNS, name, want), func() (bool, string) {
		s, err := e.Client.CoreV1().Services(testNS).Get(apiCtx(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		svc = s
		got := ips(s)
		return slices.Equal(got, want), fmt.Sprintf("ingress %v", got)
	})
	return svc
}

// events returns the core/v1 Events on Service ns1/name with reason.
func (e *lbEnv) events(t *testing.T, name, reason string) []corev1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": "Service", "involvedObject.name": name, "reason": reason}.AsSelector().String()
	l, err := e.Client.CoreV1().Events(testNS).List(apiCtx(t), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return l.Items
}

// waitEvent waits for an Event on Service ns1/name with reason whose message
// contains every string in want, and returns it.
func (e *lbEnv) waitEvent(t *testing.T, name, reason string, want ...string) corev1.Event {
	t.Helper()
	var found corev1.Event
	kubetest.Eventually(t, waitTimeout, fmt.Sprintf("event %s on %s/%s containing %q", reason, testNS, name, want), func() (bool, string) {
		evs := e.events(t, name, reason)
		var msgs []string
		for _, ev := range evs {
			msgs = append(msgs, ev.Message)
			if containsAll(ev.Message, want) {
				found = ev
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %q", msgs)
	})
	return found
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// statusManagers returns the field managers of Service ns1/name's status
// subresource.
func statusManagers(svc *corev1.Service) []string {
	var out []string
	for _, mf := range svc.ManagedFields {
		if mf.Subresource == "status" {
			out = append(out, mf.Manager)
		}
	}
	return out
}

// running is a Run or RunLeaderElected call in its own goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// start runs fn(ctx) until stop or the end of the test.
func start(t *testing.T, fn func(ctx context.Context) error) *running {
	t.Helper()
	_, tctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(tctx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = fn(ctx)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the run and waits (bounded) for it to return; it returns what it
// returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t, stopTimeout)
}

// wait waits up to timeout for the run to return by itself.
func (r *running) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		t.Fatalf("run did not return within %v", timeout)
		return errors.New("timeout")
	}
}

// returned reports whether the run has returned.
func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// newController returns a controller on e's API server with cfg (default
// class, default-class on, when cfg.Plan is zero) and a field manager.
func (e *lbEnv) newController(t *testing.T, client kubernetes.Interface, manager string) *Controller {
	t.Helper()
	dyn := e.dyn
	c, err := New(client, dyn, Config{
		Plan:         plan.Config{Class: plan.DefaultClass, IsDefault: true},
		FieldManager: manager,
		Resync:       time.Minute,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// startController runs a controller until the end of the test (or stop).
func (e *lbEnv) startController(t *testing.T, manager string) *running {
	t.Helper()
	return start(t, e.newController(t, e.Client, manager).Run)
}

// updateService re-reads Service ns1/name, applies change and updates it,
// retrying conflicts (bounded).
func (e *lbEnv) updateService(t *testing.T, name string, status bool, change func(*corev1.Service)) *corev1.Service {
	t.Helper()
	for i := 0; i < 10; i++ {
		svc := e.getService(t, name)
		change(svc)
		var err error
		var got *corev1.Service
		if status {
			got, err = e.Client.CoreV1().Services(testNS).UpdateStatus(apiCtx(t), svc, metav1.UpdateOptions{FieldManager: "someone-else"})
		} else {
			got, err = e.Client.CoreV1().Services(testNS).Update(apiCtx(t), svc, metav1.UpdateOptions{})
		}
		if err == nil {
			return got
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update service %s/%s: %v", testNS, name, err)
		}
	}
	t.Fatalf("update service %s/%s: conflicts 10 times", testNS, name)
	return nil
}

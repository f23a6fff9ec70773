package describe

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/kubectlget"
)

// heldCluster is a small embedded-control-plane view: Services web, web-2
// and api (in other), a node and a pod, and an event about web.
func heldCluster() Held {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	svc := func(ns, name string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, UID: types.UID("uid-" + name)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10"}}
	}
	web := svc("default", "web", map[string]string{"app": "web"})
	ev := corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "web", UID: web.UID},
		Type:           "Normal", Reason: "IPAllocated", Message: "Assigned IP 172.26.236.180 from pool lab", Count: 1,
		FirstTimestamp: metav1.NewTime(now.Add(-time.Minute)), LastTimestamp: metav1.NewTime(now.Add(-time.Minute)),
		Source: corev1.EventSource{Component: "svcnet-lb-controller"}}
	return Held{R: &controlplane.Result{
		Services: []*corev1.Service{svc("default", "web-2", nil), web, svc("other", "api", map[string]string{"app": "api"})},
		Nodes:    []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "uid-node1"}}},
		Pods: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1"},
			Spec: corev1.PodSpec{NodeName: "node1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}},
	}, Recorded: []corev1.Event{ev}}
}

func runDescribe(t *testing.T, args []string, o Options) (string, string, error) {
	t.Helper()
	o.Now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var out, errOut bytes.Buffer
	err := Run(context.Background(), &out, &errOut, heldCluster(), args, o)
	return out.String(), errOut.String(), err
}

// names returns the Name: line of each description in out.
func names(out string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(l, "Name:"); ok {
			got = append(got, strings.TrimSpace(n))
		}
	}
	return got
}

// Run chooses objects and events as kubectl describe does.
func TestRunChoosesAsKubectl(t *testing.T) {
	yes := true
	for _, c := range []struct {
		args     []string
		o        Options
		want     string // the described names, space-separated
		events   bool   // an Events section is shown
		notFound []string
		stderr   string
	}{
		{args: []string{"svc", "web"}, want: "web", events: true},
		{args: []string{"svc/web"}, want: "web", events: true},
		{args: []string{"service", "web", "web-2"}, want: "web web-2"},
		{args: []string{"svc", "web", "web-2"}, o: Options{ShowEvents: &yes}, want: "web web-2", events: true},
		{args: []string{"svc"}, want: "web web-2"}, // the namespace's, sorted
		{args: []string{"svc", "-"}, o: Options{}, notFound: []string{"-"}},
		{args: []string{"svc"}, o: Options{AllNamespaces: true}, want: "web web-2 api"}, // by namespace, then name
		{args: []string{"svc"}, o: Options{Selector: "app"}, want: "web", events: true},
		{args: []string{"svc"}, o: Options{Selector: "app=none"}, stderr: "No resources found in default namespace.\n"},
		{args: []string{"svc"}, o: Options{Namespace: "other"}, want: "api", events: true},
		{args: []string{"svc", "we"}, want: "web web-2"}, // by name prefix, events off
		{args: []string{"svc", "web", "nope"}, want: "web", notFound: []string{"nope"}},
		{args: []string{"svc/nope", "svc/web-2"}, want: "web-2", notFound: []string{"nope"}},
		{args: []string{"no", "node1"}, want: "node1", events: true},
		{args: []string{"po", "web-1"}, want: "web-1", events: true},
	} {
		out, stderr, err := runDescribe(t, c.args, c.o)
		var nf []string
		for _, e := range joined(err) {
			var n *kubectlget.NotFoundError
			if !errors.As(e, &n) {
				t.Fatalf("%q: %v", c.args, err)
			}
			nf = append(nf, n.Name)
		}
		if got := strings.Join(names(out), " "); got != c.want || strings.Contains(out, "\nEvents:") != c.events ||
			strings.Join(nf, " ") != strings.Join(c.notFound, " ") || stderr != c.stderr {
			t.Errorf("%q %+v: described %q (events %v), not found %q, stderr %q; want %q (events %v), %q, %q\n%s",
				c.args, c.o, got, strings.Contains(out, "\nEvents:"), nf, stderr, c.want, c.events, c.notFound, c.stderr, out)
		}
	}
	out, _, _ := runDescribe(t, []string{"svc", "web"}, Options{})
	if !strings.Contains(out, "Normal  IPAllocated  60s   svcnet-lb-controller  Assigned IP 172.26.236.180 from pool lab") {
		t.Errorf("describe svc web: no IPAllocated event row:\n%s", out)
	}
	if _, _, err := runDescribe(t, []string{"svc", "web"}, Options{AllNamespaces: true}); err == nil {
		t.Error("describe svc web -A: no error; kubectl refuses a name across all namespaces")
	}
	if _, _, err := runDescribe(t, []string{"deployments"}, Options{}); err == nil {
		t.Error("describe deployments: no error")
	}
}

func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

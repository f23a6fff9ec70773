package kubectlget

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
)

func result() *controlplane.Result {
	now := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	svc := func(ns, name, ip string, labels map[string]string) *corev1.Service {
		return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, CreationTimestamp: now},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	}
	return &controlplane.Result{
		Services: []*corev1.Service{svc("default", "web", "10.96.0.20", map[string]string{"app": "web"}),
			svc("default", "db", "10.96.0.30", map[string]string{"app": "db"}), svc("other", "api", "10.96.0.40", nil)},
		Pods: []*corev1.Pod{{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", CreationTimestamp: now}}},
	}
}

func get(t *testing.T, args []string, o Options) (string, string, error) {
	t.Helper()
	o.Now = time.Date(2026, 12, 1, 0, 5, 0, 0, time.UTC)
	var out, errOut strings.Builder
	err := Get(&out, &errOut, result(), args, o)
	return out.String(), errOut.String(), err
}

// TestGetForms: each argument form and filter chooses the objects kubectl
// would, in list order (namespace, name) or the order names were given.
func TestGetForms(t *testing.T) {
	for _, c := range []struct {
		args []string
		o    Options
		want string
	}{
		{[]string{"svc"}, Options{Output: "name"}, "service/db\nservice/web\n"},
		{[]string{"services", "web", "db"}, Options{Output: "name"}, "service/web\nservice/db\n"},
		{[]string{"svc/web", "pod/web-1"}, Options{Output: "name"}, "service/web\npod/web-1\n"},
		{[]string{"svc,po"}, Options{Output: "name"}, "service/db\nservice/web\npod/web-1\n"},
		{[]string{"all"}, Options{Output: "name"}, "pod/web-1\nservice/db\nservice/web\n"},
		{[]string{"svc"}, Options{Output: "name", AllNamespaces: true}, "service/db\nservice/web\nservice/api\n"},
		{[]string{"svc"}, Options{Output: "name", Namespace: "other"}, "service/api\n"},
		{[]string{"svc"}, Options{Output: "name", Selector: "app in (web,api)", AllNamespaces: true}, "service/web\n"},
		{[]string{"svc"}, Options{Output: "name", Selector: "!app", AllNamespaces: true}, "service/api\n"},
		{[]string{"svc"}, Options{Output: "name", FieldSelector: "metadata.name!=web"}, "service/db\n"},
		{[]string{"svc"}, Options{Output: "name", SortBy: "{.spec.clusterIP}", AllNamespaces: true}, "service/web\nservice/db\nservice/api\n"},
		{[]string{"svc", "web"}, Options{Output: "jsonpath={.spec.clusterIP}"}, "10.96.0.20"},
		{[]string{"svc"}, Options{Output: "jsonpath={.items[*].metadata.name}"}, "db web"},
		{[]string{"svc"}, Options{Output: "custom-columns=N:.metadata.name,L:.metadata.labels.app"}, "N     L\ndb    db\nweb   web\n"},
		{[]string{"svc", "web"}, Options{}, "NAME   TYPE        CLUSTER-IP   EXTERNAL-IP   PORT(S)   AGE\nweb    ClusterIP   10.96.0.20   <none>        80/TCP    5m\n"},
		{[]string{"svc", "web"}, Options{NoHeaders: true, ShowLabels: true}, "web   ClusterIP   10.96.0.20   <none>   80/TCP   5m   app=web\n"},
		{[]string{"all"}, Options{NoHeaders: true}, "pod/web-1   0/0   Pending   0   5m\n\nservice/db    ClusterIP   10.96.0.30   <none>   80/TCP   5m\nservice/web   ClusterIP   10.96.0.20   <none>   80/TCP   5m\n"},
	} {
		out, _, err := get(t, c.args, c.o)
		if err != nil || out != c.want {
			t.Errorf("get %q %+v = %q, %v; want %q", c.args, c.o, out, err, c.want)
		}
	}
}

// TestGetErrors: kubectl's words for what cannot be got.
func TestGetErrors(t *testing.T) {
	out, _, err := get(t, []string{"svc", "web", "nope"}, Options{Output: "name"})
	var nf *NotFoundError
	if out != "service/web\n" || !errors.As(err, &nf) || err.Error() != `Error from server (NotFound): services "nope" not found` {
		t.Errorf("a missing name: %q, %v; want web printed, then NotFound", out, err)
	}
	if _, errOut, err := get(t, []string{"svc"}, Options{Namespace: "empty"}); err != nil || errOut != "No resources found in empty namespace.\n" {
		t.Errorf("an empty namespace: %q, %v", errOut, err)
	}
	for _, c := range []struct {
		args []string
		o    Options
		want string
	}{
		{[]string{"deployments"}, Options{}, `the server doesn't have a resource type "deployments"`},
		{nil, Options{}, "you must specify the type of resource to get"},
		{[]string{"svc", "web"}, Options{Selector: "app=web"}, "name cannot be provided when a selector is specified"},
		{[]string{"svc"}, Options{FieldSelector: "spec.type=ClusterIP"}, "field label not supported: spec.type"},
		{[]string{"svc"}, Options{Output: "xml"}, `unable to match a printer suitable for the output format "xml"`},
		{[]string{"svc"}, Options{Output: "custom-columns=NAME"}, "expected <header>:<json-path-expr>"},
		{[]string{"svc", "svc/web"}, Options{}, "there is no need to specify a resource type as a separate argument"},
		{[]string{"svc", "web"}, Options{AllNamespaces: true}, "a resource cannot be retrieved by name across all namespaces"},
	} {
		if _, _, err := get(t, c.args, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("get %q %+v: %v; want an error saying %q", c.args, c.o, err, c.want)
		}
	}
}

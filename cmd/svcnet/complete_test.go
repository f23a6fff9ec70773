package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// complete runs `svcnet __complete args...` (what the shell scripts ask)
// and returns the candidates and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{"__complete"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("__complete %q: %v", args, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// TestCompleteStatic: resource types and kinds, which need no lab, with
// file names never offered (directive 4, NoFileComp).
func TestCompleteStatic(t *testing.T) {
	all := []string{"endpoints", "endpointslices", "events", "ipaddresspools", "nodes", "pods", "services"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", ""}, all},
		{[]string{"get", "p"}, []string{"pods"}},
		{[]string{"lab", "get", ""}, all},
		{[]string{"lab", "get", "svc", ""}, nil},
		{[]string{"describe", ""}, []string{"nodes", "pods", "services"}},
		{[]string{"lab", "describe", "s"}, []string{"services"}},
		{[]string{"lab", "delete", "endpoint"}, []string{"endpoints", "endpointslice"}},
		{[]string{"lab", "delete", ""}, deleteTypes},
		{[]string{"lab", "up", "--ip-family", ""}, []string{"ipv4", "ipv6", "dual"}},
	} {
		got, directive := complete(t, c.args...)
		if !slices.Equal(got, c.want) || directive != ":4" {
			t.Errorf("__complete %q = %q %s; want %q :4", c.args, got, directive, c.want)
		}
	}
}

// TestNamesOf: the names a resource type completes to, by any name get
// takes, in one namespace or (ns "") every one as NAMESPACE/NAME; Nodes,
// pools and namespaces have none.
func TestNamesOf(t *testing.T) {
	om := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	r := &controlplane.Result{
		Services:       []*corev1.Service{{ObjectMeta: om("default", "web")}, {ObjectMeta: om("other", "api")}, {ObjectMeta: om("default", "db")}},
		Pods:           []*corev1.Pod{{ObjectMeta: om("default", "web-1")}},
		EndpointSlices: []*discoveryv1.EndpointSlice{{ObjectMeta: om("default", "web-abc")}},
		Nodes:          []*corev1.Node{{ObjectMeta: om("", "node1")}},
		Namespaces:     []*corev1.Namespace{{ObjectMeta: om("", "default")}, {ObjectMeta: om("", "other")}},
		Pools:          []*pool.IPAddressPool{{ObjectMeta: om("", "lab")}},
	}
	for _, c := range []struct {
		res, ns string
		want    []string
	}{
		{"svc", "default", []string{"db", "web"}},
		{"service", "", []string{"default/db", "default/web", "other/api"}},
		{"po", "default", []string{"web-1"}},
		{"endpointslice", "default", []string{"web-abc"}},
		{"endpoints", "other", []string{"api"}},
		{"nodes", "default", []string{"node1"}},
		{"namespace", "default", []string{"default", "other"}},
		{"ipaddresspools", "", []string{"lab"}},
		{"nonsense", "default", nil},
	} {
		if got := namesOf(r, c.res, c.ns); !slices.Equal(got, c.want) {
			t.Errorf("namesOf(%s, %q) = %q, want %q", c.res, c.ns, got, c.want)
		}
	}
}

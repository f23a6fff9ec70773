package kube

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// The node of TestDeployProxyServes: its name, its address on an
// interface of its network namespace, and a Service whose one endpoint is a
// server on that address.
const (
	runNodeName     = "node1"
	runNodeAddr     = "10.77.0.1"
	runClusterIP    = "10.96.0.77"
	runEndpointPort = 8077
)

// TestDeployProxyServes runs deploy/proxy's DaemonSet container as a kubelet
// would, short of the image: the command line verbatim ($(NODE_NAME)
// expanded from the downward API, the svcnet binary for the image's), with
// hostNetwork (a network namespace of its own standing for the node's), the
// ConfigMap's proxy.yaml and the memberlist Secret's key at the files its
// flags name, and no flag naming a source of state: only the in-cluster
// configuration a Pod of ServiceAccount svcnet-proxy gets
// (/var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/
// PORT), against a real apiserver holding deploy/proxy's ServiceAccount and
// RBAC. On a real cluster this container used to crash-loop ("no source of
// state"). Its readiness probe must pass, which needs every list and watch to
// be allowed by the ClusterRole alone, and it must serve: a ClusterIP Service
// created afterwards answers from its endpoint.
func TestDeployProxyServes(t *testing.T) {
	netnstest.RequireRoot(t)
	idx := indexManifests(t, readProxyManifests(t))
	var (
		sa      corev1.ServiceAccount
		role    rbacv1.ClusterRole
		binding rbacv1.ClusterRoleBinding
		cm      corev1.ConfigMap
		ds      appsv1.DaemonSet
	)
	if !idx.get(t, "ServiceAccount", proxyNamespace, proxyServiceAccount, &sa) || !idx.get(t, "ClusterRole", "", proxyServiceAccount, &role) ||
		!idx.get(t, "ClusterRoleBinding", "", proxyServiceAccount, &binding) || !idx.get(t, "ConfigMap", proxyNamespace, proxyServiceAccount, &cm) ||
		!idx.get(t, "DaemonSet", proxyNamespace, proxyServiceAccount, &ds) {
		t.FailNow()
	}
	bin, env, ctx := startForPod(t, proxyNamespace)
	c := env.Client
	createAll(ctx, t, c, &sa, &role, &binding)
	kubetest.CreateNode(t, c, kubetest.Node{Name: runNodeName, InternalIPs: []string{runNodeAddr}, PodCIDRs: []string{"192.168.1.0/24"}, Ready: true})
	ns := netnstest.New(t, "proxydeploy")
	for _, argv := range [][]string{
		// A veth pair stands for the node's interface (this kernel has no
		// dummy links).
		{"ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer"},
		{"ip", "addr", "add", runNodeAddr + "/24", "dev", "eth0"},
		{"ip", "link", "set", "eth0-peer", "up"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", "default", "dev", "eth0"},
	} {
		if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
			t.Fatalf("%q in %s: %v: %s", argv, ns.Name(), err, out)
		}
	}
	podEnv, secrets := podCredentials(ctx, t, env, ns, proxyNamespace, proxyServiceAccount)
	container := ds.Spec.Template.Spec.Containers[0]
	argv := podArgv(t, ds.Spec.Template.Spec, container, bin, map[string]string{"NODE_NAME": runNodeName},
		volumeFiles(t, container, map[string]map[string]string{
			"config":     {"proxy.yaml": cm.Data["proxy.yaml"]},
			"memberlist": {"secretkey": "0123456789abcdef0123456789abcdef"},
		}))
	for _, a := range argv {
		if strings.HasPrefix(a, "--kubeconfig") || strings.HasPrefix(a, "--state") {
			t.Fatalf("DaemonSet command %q names a source of state: a Pod must use the in-cluster configuration", argv)
		}
	}
	proc := runInPod(t, ns, secrets, podEnv, argv)

	waitReady(t, proc, ns, container)

	l, err := netns.Listen(ns, "tcp", net.JoinHostPort(runNodeAddr, fmt.Sprint(runEndpointPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go serveLine(l, "endpoint "+runNodeName)
	createServiceWithEndpoint(ctx, t, c)
	target := net.JoinHostPort(runClusterIP, "80")
	waitFor(t, proc, "ClusterIP "+target+" answered by its endpoint", func() error {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		conn, err := netns.Dialer(ns)(cctx, "tcp", target)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(line); got != "endpoint "+runNodeName {
			return fmt.Errorf("answered %q", got)
		}
		return nil
	})
}

// podArgv returns container's command line as the kubelet runs it: $(VAR)
// references expanded from env (the container's env values, with downward
// values given in downward), argv[0] replaced by bin (the image has svcnet on
// $PATH), and every argument naming a file under a volume mount rewritten to
// the file files holds for it.
func podArgv(t *testing.T, spec corev1.PodSpec, c corev1.Container, bin string, downward, files map[string]string) []string {
	t.Helper()
	vals := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vals[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			v, ok := downward[e.Name]
			if !ok {
				t.Fatalf("env %s: no downward value given for fieldRef %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			vals[e.Name] = v
		}
	}
	argv := append(slices.Clone(c.Command), c.Args...)
	argv[0] = bin
	for i, a := range argv {
		for k, v := range vals {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		for in, out := range files {
			a = strings.ReplaceAll(a, in, out)
		}
		if strings.Contains(a, "$(") {
			t.Fatalf("argument %q: a $(VAR) the container's env does not define", a)
		}
		argv[i] = a
	}
	return argv
}

// volumeFiles writes, for each volume of c named in content, its files
// (name → content) under a temporary directory and returns the map from each
// file's path in the container (mountPath/name) to the written file's path.
func volumeFiles(t *testing.T, c corev1.Container, content map[string]map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for vol, fs := range content {
		i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == vol })
		if i < 0 {
			t.Fatalf("container %s mounts no volume %s", c.Name, vol)
		}
		dir := t.TempDir()
		for name, data := range fs {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			out[filepath.Join(c.VolumeMounts[i].MountPath, name)] = p
		}
	}
	return out
}

// serveLine answers every connection accepted on l with line and a newline.
func serveLine(l net.Listener, line string) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = fmt.Fprintln(conn, line)
		conn.Close()
	}
}

// createServiceWithEndpoint creates Service default/run (ClusterIP
// runClusterIP, port 80 → runEndpointPort) and its EndpointSlice with one
// ready endpoint, runNodeAddr on runNodeName.
func createServiceWithEndpoint(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			ClusterIP: runClusterIP,
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(runEndpointPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service default/run: %v", err)
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "run-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "run"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{runNodeAddr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(runNodeName),
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(runEndpointPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create EndpointSlice default/run-1: %v", err)
	}
}

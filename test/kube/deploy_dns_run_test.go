package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// dnsServeTimeout bounds the wait for the Deployment's process to report
// ready and answer.
const dnsServeTimeout = 60 * time.Second

// TestDeployDNSServes runs deploy/dns's container as a kubelet would, short of
// the container image: the Deployment's command line verbatim (the svcnet
// binary for the image's), in a network namespace of its own (a Pod's), with
// the in-cluster configuration a Pod of ServiceAccount svcnet-dns gets (a
// token of that ServiceAccount at /var/run/secrets/kubernetes.io/
// serviceaccount, KUBERNETES_SERVICE_HOST/PORT), against a real apiserver
// holding deploy/dns's ServiceAccount, RBAC and Service. Its readiness probe
// (/healthz on the metrics port) must pass, which needs every list and watch
// to be allowed by the ClusterRole alone; then kube-dns's own name must
// resolve to 10.96.0.10 over UDP and TCP on the Service's target port.
func TestDeployDNSServes(t *testing.T) {
	netnstest.RequireRoot(t)
	ms, _ := readDNSManifests(t)
	idx := indexManifests(t, ms)
	var (
		sa      corev1.ServiceAccount
		role    rbacv1.ClusterRole
		binding rbacv1.ClusterRoleBinding
		svc     corev1.Service
		d       appsv1.Deployment
		cmRole  rbacv1.Role
		cmBind  rbacv1.RoleBinding
	)
	if !idx.get(t, "ServiceAccount", dnsNamespace, dnsName, &sa) || !idx.get(t, "ClusterRole", "", dnsName, &role) ||
		!idx.get(t, "ClusterRoleBinding", "", dnsName, &binding) || !idx.get(t, "Service", dnsNamespace, dnsServiceName, &svc) ||
		!idx.get(t, "Deployment", dnsNamespace, dnsName, &d) || !idx.get(t, "Role", dnsNamespace, dnsName, &cmRole) ||
		!idx.get(t, "RoleBinding", dnsNamespace, dnsName, &cmBind) {
		t.FailNow()
	}
	bin, env, ctx := startForPod(t, dnsNamespace)
	c := env.Client
	createAll(ctx, t, c, &sa, &role, &binding, &svc, &cmRole, &cmBind)
	ns := netnstest.New(t, "dnsdeploy")
	podEnv, secrets := podCredentials(ctx, t, env, ns, dnsNamespace, dnsName)
	container := d.Spec.Template.Spec.Containers[0]
	argv := append(slices.Clone(container.Command), container.Args...)
	argv[0] = bin // the image has svcnet on $PATH
	proc := runInPod(t, ns, secrets, podEnv, argv)

	waitReady(t, proc, ns, container)
	name := dnsServiceName + "." + dnsNamespace + ".svc.cluster.local."
	for _, p := range svc.Spec.Ports {
		if p.Name == "metrics" {
			continue
		}
		server := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(containerPort(container, p.TargetPort)))
		network := strings.ToLower(string(p.Protocol))
		waitFor(t, proc, fmt.Sprintf("%s A over %s at %s", name, network, server), func() error {
			got, err := exchangeA(ctx, netns.Dialer(ns), network, server, name)
			if err == nil && !slices.Equal(got, []string{dnsClusterIP}) {
				err = fmt.Errorf("answered %q, want [%s]", got, dnsClusterIP)
			}
			return err
		})
	}
	checkKubeDNSConfigMap(ctx, t, c, ns, proc, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(containerPort(container, svc.Spec.Ports[0].TargetPort))))
}

// checkKubeDNSConfigMap: the kube-dns ConfigMap's stubDomains take effect
// while it exists, read with nothing but deploy/dns's RBAC (its Role on that
// one ConfigMap), and stop when it is deleted. The stub domain's server is a
// fake in the Pod's own network namespace.
func checkKubeDNSConfigMap(ctx context.Context, t *testing.T, c kubernetes.Interface, ns *netns.NS, proc *podProcess, server netip.AddrPort) {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Do(func() error {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	dnstest.Serve(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg).SetReply(req)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(1, 1, 1, 1)}}
		_ = w.WriteMsg(m)
	}), pc, nil)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
		Data:       map[string]string{"stubDomains": fmt.Sprintf(`{"acme.local": [%q]}`, pc.LocalAddr().String())},
	}
	if _, err := c.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ConfigMap kube-system/kube-dns: %v", err)
	}
	waitFor(t, proc, "abc.acme.local A from the stub domain's server", func() error {
		got, err := exchangeA(ctx, netns.Dialer(ns), "udp", server, "abc.acme.local.")
		if err == nil && !slices.Equal(got, []string{"1.1.1.1"}) {
			err = fmt.Errorf("answered %q, want [1.1.1.1]", got)
		}
		return err
	})
	if err := c.CoreV1().ConfigMaps("kube-system").Delete(ctx, "kube-dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, proc, "abc.acme.local no longer forwarded to the stub once the ConfigMap is gone", func() error {
		got, err := exchangeA(ctx, netns.Dialer(ns), "udp", server, "abc.acme.local.")
		if err == nil {
			return fmt.Errorf("answered %q", got)
		}
		return nil
	})
}

// podProcess is a process started by runInPod.
type podProcess struct {
	name   string        // "svcnet dns", "svcnet proxy"
	log    string        // its stdout and stderr
	exited chan struct{} // closed when it has exited
}

// runInPod starts argv in ns as a container of a Pod would run: its own
// mount namespace (`ip netns exec` makes one) with a tmpfs on /var/run
// holding secrets/kubernetes.io/serviceaccount/{token,ca.crt} copied from
// secretsDir, a resolv.conf (nameserver 192.0.2.53, as dnsPolicy Default would
// give the node's) bind-mounted on /etc/resolv.conf, and env added. The process is killed when the test ends.
func runInPod(t *testing.T, ns *netns.NS, secretsDir string, env, argv []string) *podProcess {
	t.Helper()
	const script = `set -e
mount -t tmpfs -o size=1m tmpfs /var/run
d=/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$d"
cp "$SECRETS/token" "$SECRETS/ca.crt" "$d/"
printf 'nameserver 192.0.2.53\n' > /var/run/resolv.conf
mount --bind /var/run/resolv.conf /etc/resolv.conf
exec "$@"`
	logPath := filepath.Join(t.TempDir(), "pod.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := ns.Command(append([]string{"sh", "-c", script, "sh"}, argv...)...)
	cmd.Env = append(append(os.Environ(), "SECRETS="+secretsDir), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q in %s: %v", argv, ns.Name(), err)
	}
	p := &podProcess{log: logPath, exited: make(chan struct{}), name: filepath.Base(argv[0]) + " " + strings.Join(argv[1:min(2, len(argv))], " ")}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%q still running 10s after SIGKILL", argv)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", strings.Join(argv[1:min(2, len(argv))], " "), b)
		}
	})
	return p
}

// waitFor retries fn every 200 ms until it succeeds, failing t after
// dnsServeTimeout or at once when the process exits.
func waitFor(t *testing.T, p *podProcess, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(dnsServeTimeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("%s: %s exited (last: %v)", what, p.name, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, dnsServeTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// exchangeA asks server for name's A records over network (udp or tcp),
// dialing through dial, and returns them; a reply whose rcode is not NOERROR
// is an error.
func exchangeA(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), network string, server netip.AddrPort, name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := dial(ctx, network, server.String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	r, _, err := (&dns.Client{Net: network}).ExchangeWithConnContext(ctx, q, &dns.Conn{Conn: conn})
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, errors.New(dns.RcodeToString[r.Rcode])
	}
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return ips, nil
}

package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configures Start. The zero value starts etcd and kube-apiserver only.
type Options struct {
	// ControllerManager also starts kube-controller-manager with Controllers.
	ControllerManager bool
	// Controllers is kube-controller-manager's --controllers; default
	// DefaultControllers.
	Controllers []string
	// ServiceClusterIPRange is --service-cluster-ip-range; default 10.96.0.0/12.
	ServiceClusterIPRange string
	// AdvertiseAddress, when set, is --advertise-address and enables the lease
	// endpoint reconciler, so default/kubernetes gets Endpoints and an EndpointSlice
	// with that address (it must not be loopback; nothing listens there: the
	// apiserver binds 127.0.0.1 only). When empty, default/kubernetes exists but has
	// no endpoints.
	AdvertiseAddress string
	// APIServerFlags and ControllerManagerFlags are appended to the generated flags
	// (a repeated single-valued flag overrides the generated one).
	APIServerFlags         []string
	ControllerManagerFlags []string
	// ReadyTimeout bounds the wait for each component to become ready; default 90s.
	ReadyTimeout time.Duration
}

// Env is a running control plane owned by one test.
type Env struct {
	// Kubeconfig is the path of a kubeconfig file for the admin user (for commands
	// under test that take --kubeconfig).
	Kubeconfig string
	// Config and Client talk to the apiserver as the admin user (system:masters).
	Config *rest.Config
	Client kubernetes.Interface
	// URL is the apiserver's https://127.0.0.1:port; Token its admin bearer token.
	URL, Token string

	t    testing.TB
	opts Options
	dir  string
	etcd *etcd
	api  *apiServer
	kcm  *process
	// logged is set once the logs were written to the test log.
	logged bool
}

// Start starts etcd, kube-apiserver and (if asked) kube-controller-manager for t,
// and registers their teardown with t.Cleanup. It skips or fails t by the tier's
// rules (see the package doc) and fails t, with the tail of each log, when a
// component does not become ready within Options.ReadyTimeout.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	etcdBin := checkTier(t)
	if opts.ServiceClusterIPRange == "" {
		opts.ServiceClusterIPRange = "10.96.0.0/12"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	cmds := []string{"kube-apiserver"}
	if opts.ControllerManager {
		cmds = append(cmds, "kube-controller-manager")
	}
	binDir, err := k8sBinDir(cmds...)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	// TempDir first: its removal is then registered before, so runs after, teardown.
	e := &Env{t: t, opts: opts, dir: t.TempDir()}
	t.Cleanup(e.teardown)

	if e.etcd, err = startEtcd(etcdBin, e.dir, opts.ReadyTimeout); err != nil {
		e.fatalf("start etcd: %v", err)
	}
	e.api, err = newAPIServer(filepath.Join(binDir, "kube-apiserver"), e.dir, e.etcd.clientURL, opts)
	if err != nil {
		e.fatalf("%v", err)
	}
	if err := e.api.start(opts.ReadyTimeout); err != nil {
		e.fatalf("start kube-apiserver: %v", err)
	}
	if err := e.connect(); err != nil {
		e.fatalf("%v", err)
	}
	if opts.ControllerManager {
		e.kcm, err = startControllerManager(filepath.Join(binDir, "kube-controller-manager"), e.dir, e.Kubeconfig, opts, opts.ReadyTimeout)
		if err != nil {
			e.fatalf("start kube-controller-manager: %v", err)
		}
	}
	return e
}

// connect builds Config, Client and the kubeconfig file once the apiserver has
// written its serving certificate.
func (e *Env) connect() error {
	ca, err := os.ReadFile(e.api.caFile())
	if err != nil {
		return fmt.Errorf("apiserver serving certificate: %w", err)
	}
	e.URL, e.Token = e.api.url(), e.api.token
	e.Config = &rest.Config{
		Host:            e.URL,
		BearerToken:     e.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		QPS:             200,
		Burst:           400,
		UserAgent:       "kubetest",
	}
	if e.Client, err = kubernetes.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: e.URL, CertificateAuthorityData: ca}
	kc.AuthInfos["kubetest"] = &clientcmdapi.AuthInfo{Token: e.Token}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubetest"}
	kc.CurrentContext = "kubetest"
	e.Kubeconfig = filepath.Join(e.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, e.Kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// StopAPIServer stops kube-apiserver gracefully (SIGTERM; SIGKILL after 15s),
// leaving etcd and the controller manager running. Call it from the goroutine of
// the test that called Start.
func (e *Env) StopAPIServer() {
	e.t.Helper()
	if err := e.api.proc.stop(); err != nil {
		e.fatalf("stop kube-apiserver: %v", err)
	}
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would.
func (e *Env) KillAPIServer() {
	e.t.Helper()
	if err := e.api.proc.kill(); err != nil {
		e.fatalf("kill kube-apiserver: %v", err)
	}
}

// StartAPIServer starts kube-apiserver again on the same port with the same etcd,
// certificates and token, and waits until it is ready. Config, Client and
// Kubeconfig stay valid.
func (e *Env) StartAPIServer() {
	e.t.Helper()
	if done, _ := e.api.proc.exited(); !done {
		e.fatalf("StartAPIServer: kube-apiserver is still running")
	}
	if err := e.api.start(e.opts.ReadyTimeout); err != nil {
		e.fatalf("restart kube-apiserver: %v", err)
	}
}

// Logs returns the tail (n lines) of each component's log, for failure messages.
func (e *Env) Logs(n int) string {
	var b strings.Builder
	for _, p := range e.procs() {
		fmt.Fprintf(&b, "--- %s (%s), last %d lines:\n%s\n", p.name, p.logPath, n, p.tail(n))
	}
	return b.String()
}

func (e *Env) procs() []*process {
	var ps []*process
	if e.etcd != nil {
		ps = append(ps, e.etcd.proc)
	}
	if e.api != nil && e.api.proc != nil {
		ps = append(ps, e.api.proc)
	}
	if e.kcm != nil {
		ps = append(ps, e.kcm)
	}
	return ps
}

// fatalf fails the test with the logs of every component started so far.
func (e *Env) fatalf(format string, args ...any) {
	e.t.Helper()
	e.logged = true
	e.t.Fatalf("kubetest: %s\n%s", fmt.Sprintf(format, args...), e.Logs(40))
}

// teardown kills every component (SIGKILL: their state is thrown away with the
// temp dir) and, when the test failed, logs the tail of each log first.
func (e *Env) teardown() {
	if e.t.Failed() && !e.logged {
		e.t.Logf("kubetest: test failed; component logs:\n%s", e.Logs(30))
	}
	ps := e.procs()
	for i := len(ps) - 1; i >= 0; i-- {
		if err := ps[i].kill(); err != nil {
			e.t.Errorf("kubetest teardown: %v", err)
		}
	}
}

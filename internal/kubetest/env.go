package kubetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/kubecluster"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultControllers are the kube-controller-manager controllers started when
// Options.Controllers is empty: what Services need (EndpointSlices from Pods, and
// mirrored from custom Endpoints) and nothing else.
var DefaultControllers = kubecluster.DefaultControllers

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

	t       testing.TB
	opts    Options
	dir     string
	cluster *kubecluster.Cluster
	// logged is set once the logs were written to the test log.
	logged bool
}

// Start starts etcd, kube-apiserver and (if asked) kube-controller-manager for t
// (kubecluster.Start on 127.0.0.1, free ports, data under t.TempDir), and
// registers their teardown with t.Cleanup. It skips or fails t by the tier's
// rules (see the package doc) and fails t, with the tail of each log, when a
// component does not become ready within Options.ReadyTimeout.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	cmds := []string{"kube-apiserver"}
	if opts.ControllerManager {
		cmds = append(cmds, "kube-controller-manager")
	}
	etcdBin, binDir := Binaries(t, cmds...)
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = kubecluster.DefaultReadyTimeout
	}
	// TempDir first: its removal is then registered before, so runs after, teardown.
	e := &Env{t: t, opts: opts, dir: t.TempDir()}
	t.Cleanup(e.teardown)

	c, err := kubecluster.Start(context.Background(), kubecluster.Options{
		Dir:                    e.dir,
		BinDir:                 binDir,
		EtcdBin:                etcdBin,
		ControllerManager:      opts.ControllerManager,
		Controllers:            opts.Controllers,
		ServiceClusterIPRange:  opts.ServiceClusterIPRange,
		AdvertiseAddress:       opts.AdvertiseAddress,
		APIServerFlags:         opts.APIServerFlags,
		ControllerManagerFlags: opts.ControllerManagerFlags,
		ReadyTimeout:           opts.ReadyTimeout,
	})
	if err != nil {
		// Start has stopped what it started; every log is still in the temp dir.
		e.fatalf("%v", withoutLog(err))
	}
	e.cluster = c
	e.Kubeconfig, e.URL, e.Token = c.Kubeconfig, c.URL, c.Token
	e.Config = rest.CopyConfig(c.Config)
	e.Config.UserAgent = "kubetest"
	if e.Client, err = kubernetes.NewForConfig(e.Config); err != nil {
		e.fatalf("client: %v", err)
	}
	return e
}

// StopAPIServer stops kube-apiserver gracefully (SIGTERM; SIGKILL after 15s),
// leaving etcd and the controller manager running. Call it from the goroutine of
// the test that called Start.
func (e *Env) StopAPIServer() {
	e.t.Helper()
	if err := e.cluster.StopAPIServer(); err != nil {
		e.fatalf("stop kube-apiserver: %v", err)
	}
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would.
func (e *Env) KillAPIServer() {
	e.t.Helper()
	if err := e.cluster.KillAPIServer(); err != nil {
		e.fatalf("kill kube-apiserver: %v", err)
	}
}

// StartAPIServer starts kube-apiserver again on the same port with the same etcd,
// certificates and token, and waits until it is ready. Config, Client and
// Kubeconfig stay valid.
func (e *Env) StartAPIServer() {
	e.t.Helper()
	if err := e.cluster.StartAPIServer(context.Background()); err != nil {
		e.fatalf("restart kube-apiserver: %v", withoutLog(err))
	}
}

// Logs returns the tail (n lines) of each component's log, for failure messages.
func (e *Env) Logs(n int) string { return kubecluster.Logs(e.dir, n) }

// withoutLog drops the log tail of a *kubecluster.StartError (fatalf shows every
// log anyway).
func withoutLog(err error) error {
	var se *kubecluster.StartError
	if errors.As(err, &se) {
		return fmt.Errorf("start %s: %w", se.Component, se.Err)
	}
	return err
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
	if e.cluster == nil {
		return
	}
	if err := e.cluster.Kill(); err != nil {
		e.t.Errorf("kubetest teardown: %v", err)
	}
}

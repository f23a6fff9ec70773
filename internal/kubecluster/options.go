package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/svcnet/svcnet/internal/process"
)

// Ports are the TCP ports of the components. Zero means "pick a free one on the
// caller's 127.0.0.1 at Start", which is only meaningful when the processes run in
// the caller's network namespace; Start refuses zero ports with a custom Command.
type Ports struct {
	EtcdClient, EtcdPeer int
	APIServer            int
	// ControllerManager is kube-controller-manager's --secure-port (its /healthz).
	ControllerManager int
	// Scheduler is kube-scheduler's --secure-port (its /healthz).
	Scheduler int
}

// DefaultPorts are the conventional ports, for a control plane that has a network
// namespace to itself.
var DefaultPorts = Ports{EtcdClient: 2379, EtcdPeer: 2380, APIServer: 6443, ControllerManager: 10257, Scheduler: 10259}

// DefaultControllers are the kube-controller-manager controllers started when
// Options.Controllers is empty: what Services need (EndpointSlices from Pods, and
// mirrored from custom Endpoints) and nothing else.
var DefaultControllers = []string{"endpointslice-controller", "endpointslice-mirroring-controller"}

// DialFunc makes a connection to a component (net.Dialer.DialContext's shape, the
// one of rest.Config.Dial).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options configures Start (all fields) and Attach (Dir, Command, Detach, Dial,
// ReadyTimeout; the rest is read back from Dir).
type Options struct {
	// Dir holds everything the cluster owns (see the package doc); created if
	// missing. Start reuses etcd data found there. Required.
	Dir string
	// BinDir holds kube-apiserver and, with ControllerManager and Scheduler,
	// kube-controller-manager and kube-scheduler.
	BinDir string
	// EtcdBin is the etcd binary; default FindEtcd.
	EtcdBin string

	// ControllerManager also starts kube-controller-manager with Controllers
	// (default DefaultControllers).
	ControllerManager bool
	Controllers       []string
	// ServiceAccounts keeps the ServiceAccount admission plugin on (it gives
	// each Pod its service account and mounts its token), for a controller
	// manager that runs the serviceaccount controller. Without it the plugin is
	// off: Pods could not be created before a "default" ServiceAccount exists.
	ServiceAccounts bool
	// Scheduler also starts kube-scheduler (after the controller manager), which
	// binds Pods to Nodes: for clusters with kubelets.
	Scheduler bool

	// ServiceClusterIPRange is --service-cluster-ip-range; default 10.96.0.0/12.
	ServiceClusterIPRange string
	// AdvertiseAddress, when set, is --advertise-address and enables the lease
	// endpoint reconciler, so default/kubernetes gets endpoints with that address
	// (it must not be loopback). When empty, the apiserver advertises 127.0.0.1
	// and default/kubernetes has no endpoints.
	AdvertiseAddress string
	// BindAddress is the apiserver's --bind-address; default 127.0.0.1. etcd and
	// the controller manager always listen on 127.0.0.1.
	BindAddress string
	// Ports are fixed ports; zero ones are picked free (see Ports).
	Ports Ports

	// Command makes the command that runs a component (name is the binary's
	// path); default exec.Command. Start sets its stdio and SysProcAttr.
	Command func(name string, args ...string) *exec.Cmd
	// Detach starts every component in its own session with its output to its log
	// file, so it keeps running after the caller exits; see StopDir.
	Detach bool
	// Dial is how the caller reaches the components (probes, Config); default a
	// plain net.Dialer.
	Dial DialFunc
	// ServerURL is the apiserver URL written into Dir/kubeconfig for other clients
	// (e.g. https://172.26.236.176:6443 for a lab's nodes); default the caller's URL.
	ServerURL string

	// APIServerFlags and ControllerManagerFlags are appended to the generated flags
	// (a repeated single-valued flag overrides the generated one).
	APIServerFlags         []string
	ControllerManagerFlags []string
	// SchedulerFlags are appended to kube-scheduler's generated flags.
	SchedulerFlags []string
	// ReadyTimeout bounds the wait for each component to become ready; default 90s.
	ReadyTimeout time.Duration
}

// dialer returns Dial, or a plain net.Dialer's DialContext.
func (o *Options) dialer() DialFunc {
	if o.Dial != nil {
		return o.Dial
	}
	return (&net.Dialer{}).DialContext
}

// DefaultReadyTimeout is Options.ReadyTimeout's default.
const DefaultReadyTimeout = 90 * time.Second

// config is Options with defaults applied and checked, plus what follows from them.
type config struct {
	Options
	// pickEtcd, pickAPI, pickKCM, pickSched: the component's ports are picked
	// free per attempt.
	pickEtcd, pickAPI, pickKCM, pickSched bool
}

// withRunDefaults applies the defaults Attach and Start share.
func (o Options) withRunDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("options: Dir is required")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return o, fmt.Errorf("options: dir %s: %w", o.Dir, err)
	}
	o.Dir = filepath.Clean(dir)
	if o.Command == nil {
		o.Command = exec.Command
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	return o, nil
}

// forStart applies Start's defaults and checks the options (binaries, addresses,
// ports).
func (o Options) forStart() (*config, error) {
	custom := o.Command != nil
	o, err := o.withRunDefaults()
	if err != nil {
		return nil, err
	}
	if o.EtcdBin == "" {
		if o.EtcdBin, err = FindEtcd(); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
	}
	if o.BinDir == "" {
		return nil, errors.New("options: BinDir is required")
	}
	bins := []string{o.EtcdBin, filepath.Join(o.BinDir, "kube-apiserver")}
	if o.ControllerManager {
		bins = append(bins, filepath.Join(o.BinDir, "kube-controller-manager"))
		if len(o.Controllers) == 0 {
			o.Controllers = DefaultControllers
		}
	}
	if o.Scheduler {
		bins = append(bins, filepath.Join(o.BinDir, "kube-scheduler"))
	}
	for _, b := range bins {
		if err := process.CheckExecutable(b); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
	}
	if o.ServiceClusterIPRange == "" {
		o.ServiceClusterIPRange = "10.96.0.0/12"
	}
	if _, err := firstServiceIPs(o.ServiceClusterIPRange); err != nil {
		return nil, fmt.Errorf("options: %w", err)
	}
	if o.BindAddress == "" {
		o.BindAddress = "127.0.0.1"
	}
	if _, err := netip.ParseAddr(o.BindAddress); err != nil {
		return nil, fmt.Errorf("options: bind address: %w", err)
	}
	if o.AdvertiseAddress != "" {
		if _, err := netip.ParseAddr(o.AdvertiseAddress); err != nil {
			return nil, fmt.Errorf("options: advertise address: %w", err)
		}
	}
	if o.ServerURL != "" {
		if u, err := url.Parse(o.ServerURL); err != nil || u.Scheme != "https" || u.Hostname() == "" {
			return nil, fmt.Errorf("options: server URL %q: want https://host[:port]", o.ServerURL)
		}
	}
	c := &config{Options: o}
	p := o.Ports
	c.pickEtcd = p.EtcdClient == 0 || p.EtcdPeer == 0
	c.pickAPI = p.APIServer == 0
	c.pickKCM = o.ControllerManager && p.ControllerManager == 0
	c.pickSched = o.Scheduler && p.Scheduler == 0
	if custom && (c.pickEtcd || c.pickAPI || c.pickKCM || c.pickSched) {
		return nil, fmt.Errorf("options: ports %+v: every port must be set with a custom Command (free ports are picked in the caller's namespace)", p)
	}
	return c, nil
}

// localURL is the apiserver URL for the caller (through Dial) and the controller
// manager: the bind address, or loopback when it is unspecified.
func localURL(bind string, port int) string {
	host := bind
	if a, err := netip.ParseAddr(bind); err == nil && a.IsUnspecified() {
		host = "127.0.0.1"
		if a.Is6() {
			host = "::1"
		}
	}
	return "https://" + net.JoinHostPort(host, fmt.Sprint(port))
}

// firstServiceIPs returns the first address of each range in a (comma-separated)
// --service-cluster-ip-range: the ClusterIP of default/kubernetes.
func firstServiceIPs(ranges string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, r := range splitComma(ranges) {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return nil, fmt.Errorf("service cluster IP range: %w", err)
		}
		out = append(out, p.Masked().Addr().Next())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("service cluster IP range %q: empty", ranges)
	}
	return out, nil
}

// EnvEtcd overrides the etcd binary FindEtcd returns.
const EnvEtcd = "SVCNET_ETCD"

// FindEtcd returns the etcd binary: $SVCNET_ETCD, else etcd on PATH, else
// /usr/bin/etcd.
func FindEtcd() (string, error) {
	if p := os.Getenv(EnvEtcd); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("etcd from %s: %w", EnvEtcd, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd", nil
	}
	return "", errors.New("no etcd binary on PATH or at /usr/bin/etcd")
}

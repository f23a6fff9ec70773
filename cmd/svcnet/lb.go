package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/httpserve"
	"github.com/svcnet/svcnet/internal/lb/controller"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// newLBCommand is `svcnet lb`, the parent of svcnet lb's commands.
func newLBCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lb",
		Short: "External IPs for LoadBalancer Services on bare metal",
		Long: `svcnet lb gives Services of type LoadBalancer external IPs from address pools
(IPAddressPool, svcnet.io/v1alpha1) and makes the network deliver them, as MetalLB
does. See the subcommands.`,
	}
	cmd.AddCommand(newLBControllerCommand())
	return cmd
}

// lbControllerOptions are `svcnet lb controller`'s flags; the leader-election
// ones are named as kube-controller-manager's.
type lbControllerOptions struct {
	kubeconfig    string
	class         string
	defaultClass  bool
	resync        time.Duration
	leaderElect   bool
	leNamespace   string
	leName        string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	metricsAddr   string
	serviceCIDRs  string
	verbosity     int
}

// defaultLBMetricsAddr is --metrics-bind-address's default: every address of
// the controller's Pod, for Prometheus and the kubelet's probes.
const defaultLBMetricsAddr = ":10251"

func newLBControllerCommand() *cobra.Command {
	o := &lbControllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Assign LoadBalancer Services their external IPs from IPAddressPools (kube mode)",
		Long: `svcnet lb controller watches Services, IPAddressPools and what they refer to on
a Kubernetes API server and writes each LoadBalancer Service's addresses to its
status.loadBalancer.ingress, recording Events (IPAllocated, AllocationFailed,
IPReleased) on it. Several replicas elect one leader through a Lease; only the
leader writes. It serves /healthz and Prometheus /metrics.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: the in-cluster configuration)")
	fs.StringVar(&o.class, "lb-class", plan.DefaultClass, "the spec.loadBalancerClass this controller serves")
	fs.BoolVar(&o.defaultClass, "default-class", true, "also serve LoadBalancer Services without a loadBalancerClass")
	fs.DurationVar(&o.resync, "resync-period", controller.DefaultResync, "maximum time between full recomputes")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect one leader among replicas through a Lease before writing")
	fs.StringVar(&o.leNamespace, "leader-elect-namespace", "kube-system", "namespace of the leader-election Lease")
	fs.StringVar(&o.leName, "leader-elect-lease-name", "svcnet-lb-controller", "name of the leader-election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", controller.DefaultLeaseDuration, "how long a candidate waits after the leader's last renewal before taking over")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", controller.DefaultRenewDeadline, "how long the leader retries renewing before it stops leading; less than the lease duration")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", controller.DefaultRetryPeriod, "wait between tries to acquire or renew the lease")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", defaultLBMetricsAddr, `address:port for /healthz and /metrics ("" disables)`)
	fs.StringVar(&o.serviceCIDRs, "service-cluster-ip-range", "", "the cluster's Service CIDRs (comma-separated), which no IPAddressPool may hold; ServiceCIDR objects add theirs where the apiserver serves them (1.33+)")
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity")
	return cmd
}

func (o *lbControllerOptions) run(cmd *cobra.Command) error {
	setVerbosity(o.verbosity)
	log := klog.Background()
	ctx, cancel := signalContext(cmd)
	defer cancel()

	serviceCIDRs, err := parseCIDRList(o.serviceCIDRs)
	if err != nil {
		return fmt.Errorf("--service-cluster-ip-range: %w", err)
	}
	cfg, err := kube.RESTConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	client, dyn, err := lbClients(cfg)
	if err != nil {
		return err
	}
	m := controller.NewMetrics()
	ctrl, err := controller.New(client, dyn, controller.Config{
		Plan:         plan.Config{Class: o.class, IsDefault: o.defaultClass},
		Logger:       log,
		Resync:       o.resync,
		Metrics:      m,
		ServiceCIDRs: serviceCIDRs,
	})
	if err != nil {
		return err
	}
	var le controller.LeaderElection
	var leClient kubernetes.Interface
	if o.leaderElect {
		if le, err = o.leaderElection(); err != nil {
			return err
		}
		// Its own client with a timeout, so one hung request cannot outlast the
		// renew deadline (kube-controller-manager does the same).
		leCfg := rest.CopyConfig(cfg)
		leCfg.UserAgent = controller.Component + "-leader-election"
		leCfg.Timeout = max(time.Second, o.renewDeadline/2)
		if leClient, err = kubernetes.NewForConfig(leCfg); err != nil {
			return fmt.Errorf("leader election client: %w", err)
		}
	}
	log.Info("Starting svcnet lb controller", "class", o.class, "defaultClass", o.defaultClass,
		"leaderElect", o.leaderElect, "identity", le.Identity)

	g, gctx := errgroup.WithContext(ctx)
	if o.metricsAddr != "" {
		g.Go(func() error { return serveLBMetrics(gctx, o.metricsAddr, m) })
	}
	g.Go(func() error {
		if !o.leaderElect {
			return ctrl.Run(gctx)
		}
		return controller.RunLeaderElected(gctx, leClient, le, ctrl.Run)
	})
	err = g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// leaderElection checks the leader-election flags and picks this process's
// identity: the host name (the Pod's name in a cluster) and a random suffix,
// so a restarted container is a new candidate.
func (o *lbControllerOptions) leaderElection() (controller.LeaderElection, error) {
	if !(o.leaseDuration > o.renewDeadline && o.renewDeadline > o.retryPeriod*6/5 && o.retryPeriod > 0) {
		return controller.LeaderElection{}, fmt.Errorf("leader election: want --leader-elect-lease-duration (%v) > --leader-elect-renew-deadline (%v) > 1.2 × --leader-elect-retry-period (%v) > 0",
			o.leaseDuration, o.renewDeadline, o.retryPeriod)
	}
	host, err := os.Hostname()
	if err != nil {
		return controller.LeaderElection{}, fmt.Errorf("leader election identity: %w", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return controller.LeaderElection{}, fmt.Errorf("leader election identity: %w", err)
	}
	return controller.LeaderElection{
		Identity:      host + "_" + hex.EncodeToString(b[:]),
		Namespace:     o.leNamespace,
		Name:          o.leName,
		LeaseDuration: o.leaseDuration,
		RenewDeadline: o.renewDeadline,
		RetryPeriod:   o.retryPeriod,
	}, nil
}

// lbClients returns the typed client (protobuf) and the dynamic client (JSON,
// for IPAddressPools) the controller uses.
func lbClients(cfg *rest.Config) (kubernetes.Interface, dynamic.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = controller.Component
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("dynamic client: %w", err)
	}
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, dyn, nil
}

// serveLBMetrics serves /metrics (m) and /healthz on addr until ctx ends.
func serveLBMetrics(ctx context.Context, addr string, m *controller.Metrics) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics server on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	if err := httpserve.Until(ctx, httpserve.New(mux), l); err != nil {
		return fmt.Errorf("metrics server on %s: %w", addr, err)
	}
	return nil
}

// parseCIDRList parses comma-separated CIDRs ("" is none), masked.
func parseCIDRList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

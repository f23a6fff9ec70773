package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/podroutes"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
	"github.com/svcnet/svcnet/internal/proxy/metrics"
	"github.com/svcnet/svcnet/internal/source/file"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// proxyOptions are svcnet proxy's settings: kube-proxy's flag names, and a
// --config file with KubeProxyConfiguration field names. Flags given on the
// command line override the file.
type proxyOptions struct {
	state            stateFlags
	configFile       string
	hostname         string
	clusterCIDR      string
	nodePortAddrs    []string
	masqueradeAll    bool
	healthzAddr      string
	metricsAddr      string
	profiling        bool
	memoryLimit      string
	syncPeriod       time.Duration
	minSyncPeriod    time.Duration
	serviceProxyName string
	cleanup          bool
	podRoutes        bool
	dataPlane        string
	announce         announceOptions
	verbosity        int
}

func newProxyCommand() *cobra.Command { return proxyCommand(&proxyOptions{}) }

// proxyCommand binds the command's flags to o.
func proxyCommand(o *proxyOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Program this node's Service data plane (nftables), in place of kube-proxy",
		Long: `svcnet proxy turns Services and EndpointSlices into nftables rules on this
node (tables "svcnet" and the NAT shards "svcnet-nat-NN", in families ip and
ip6) and keeps them right as they change.
It serves /healthz and /livez, healthCheckNodePorts, and Prometheus metrics
with kube-proxy's names.

With --data-plane none it programs no Service at all (no nftables table, no
healthCheckNodePort) and runs only --pod-routes and --announce, beside another
Service proxy such as kube-proxy; /healthz then answers 200 once the state is
synced and the node known.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.state.bind(fs)
	fs.StringVar(&o.configFile, "config", "", "KubeProxyConfiguration YAML file; flags given on the command line override it")
	fs.StringVar(&o.hostname, "hostname-override", "", "this node's name (default: the host name)")
	fs.StringVar(&o.clusterCIDR, "cluster-cidr", "", "pod CIDR(s), comma-separated, one per family: traffic from outside them to ClusterIPs is masqueraded")
	fs.StringSliceVar(&o.nodePortAddrs, "nodeport-addresses", nil, `CIDRs of the node addresses that serve NodePorts, or "primary" (default: primary)`)
	fs.BoolVar(&o.masqueradeAll, "masquerade-all", false, "masquerade all traffic sent to ClusterIPs")
	fs.StringVar(&o.healthzAddr, "healthz-bind-address", healthcheck.DefaultHealthzBindAddress, `address:port for /healthz and /livez ("" disables)`)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "127.0.0.1:10249", `address:port for /metrics ("" disables)`)
	fs.DurationVar(&o.syncPeriod, "sync-period", proxy.DefaultSyncPeriod, "maximum time between full syncs (drift repair)")
	fs.DurationVar(&o.minSyncPeriod, "min-sync-period", proxy.DefaultMinSyncPeriod, "minimum time between syncs: changes within it are coalesced")
	fs.StringVar(&o.serviceProxyName, "service-proxy-name", "", "serve only Services labelled service.kubernetes.io/service-proxy-name=NAME (default: only unlabelled ones, as kube-proxy)")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go profiles under /debug/pprof/ on the metrics address")
	fs.StringVar(&o.memoryLimit, "memory-limit", memoryLimitAuto, `Go soft memory limit: "auto" derives it from the live heap after each sync (lifted during full syncs; GOMEMLIMIT, when set, wins), "none" leaves the runtime's defaults, a quantity (256Mi) fixes it`)
	fs.BoolVar(&o.cleanup, "cleanup", false, "remove everything svcnet proxy programmed, then exit")
	fs.BoolVar(&o.podRoutes, "pod-routes", false, "route other nodes' pod CIDRs via their InternalIPs (host-gw; routes of protocol 154 in the main table)")
	fs.StringVar(&o.dataPlane, "data-plane", dataPlaneNFTables, `Service data plane: "nftables" programs Services; "none" programs none (no nftables table, no healthCheckNodePorts) and runs only --pod-routes and --announce, beside another Service proxy such as kube-proxy`)
	o.announce.bind(fs)
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity")
	return cmd
}

func (o *proxyOptions) run(cmd *cobra.Command) error {
	setVerbosity(o.verbosity)
	log := klog.Background().WithName("proxy")
	ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	if o.cleanup {
		return runCleanup(ctx, log)
	}
	cfg, err := o.config(cmd.Flags())
	if err != nil {
		return err
	}
	if err := o.state.validate(); err != nil {
		return err
	}
	if err := o.announce.validate(); err != nil {
		return err
	}
	if err := o.announce.loadKeys(); err != nil {
		return err
	}
	if err := o.validateDataPlane(); err != nil {
		return err
	}
	noHeapProfilesUnless(o.profiling)
	mem, err := newMemoryPolicy(o.memoryLimit, runtimeMemory{}, log.WithName("memory"))
	if err != nil {
		return err
	}

	store := model.NewStore()
	m := metrics.New()
	health := healthcheck.NewProxyHealthServer(healthcheck.ProxyHealthConfig{
		Addr:          o.healthzAddr,
		HealthTimeout: healthcheck.HealthTimeout(cfg.SyncPeriod),
		NodeEligible: func() bool {
			return nodeEligible(store.Snapshot().Node(cfg.NodeName))
		},
		Probes: m,
		Logger: log.WithName("healthz"),
	})
	// The Service data plane, or with --data-plane none what stands for it:
	// healthy once the state is synced.
	dataPlane := []func(context.Context) error{func(ctx context.Context) error {
		return reportSynced(ctx, store, health, cfg.Families)
	}}
	if o.dataPlane == dataPlaneNFTables {
		runners, closeAll, err := serviceDataPlane(cfg, store, health, m, mem, log)
		if err != nil {
			return err
		}
		defer closeAll()
		dataPlane = runners
	}
	src, err := o.source(store, log)
	if err != nil {
		return err
	}
	fams := make([]string, len(cfg.Families))
	for i, f := range cfg.Families {
		fams[i] = f.String()
	}
	log.Info("starting", "node", cfg.NodeName, "dataPlane", o.dataPlane, "families", fams, "nodePortAddresses", cfg.NodePortAddresses,
		"clusterCIDRs", cfg.ClusterCIDRs, "syncPeriod", cfg.SyncPeriod, "minSyncPeriod", cfg.MinSyncPeriod)
	var routes *podroutes.Reconciler
	if o.podRoutes {
		k, err := podroutes.NewNetlink()
		if err != nil {
			return err
		}
		defer k.Close()
		if routes, err = podroutes.New(podroutes.Config{NodeName: cfg.NodeName, Kernel: k, Logger: log.WithName("pod-routes")}); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return src(gctx) })
	for _, run := range dataPlane {
		g.Go(func() error { return run(gctx) })
	}
	if routes != nil {
		g.Go(func() error { return routes.Run(gctx, store) })
	}
	if o.announce.mode == "l2" {
		g.Go(func() error {
			return o.announce.runSpeaker(gctx, store, cfg.NodeName, m.SpeakerHeartbeatsRejectedTotal, log)
		})
	}
	if o.healthzAddr != "" {
		g.Go(func() error { return health.Run(gctx) })
	}
	if o.metricsAddr != "" {
		g.Go(func() error {
			return metrics.NewServer(o.metricsAddr, m, log.WithName("metrics"), o.profiling).Run(gctx)
		})
	}
	err = g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// runCleanup is --cleanup: it removes svcnet's nftables tables and pod routes.
func runCleanup(ctx context.Context, log klog.Logger) error {
	conn, err := openNFTables()
	if err != nil {
		return err
	}
	if err := proxy.Cleanup(ctx, conn); err != nil {
		return err
	}
	log.Info("removed svcnet's nftables tables")
	n, err := cleanupPodRoutes(ctx)
	if err != nil {
		return err
	}
	log.Info("removed svcnet's pod routes", "routes", n)
	return nil
}

// source returns the run function of the configured source of state.
func (o *proxyOptions) source(store *model.Store, log klog.Logger) (func(context.Context) error, error) {
	if o.state.kubeconfig != "" {
		client, err := kube.NewClient(o.state.kubeconfig)
		if err != nil {
			return nil, err
		}
		s := kube.New(client, store, kube.Options{ServiceProxyName: o.serviceProxyName, Logger: log})
		return s.Run, nil
	}
	cp, err := o.state.controlPlaneConfig()
	if err != nil {
		return nil, err
	}
	s := file.New(file.Options{Path: o.state.state, Config: cp, ServiceProxyName: o.serviceProxyName}, store, log)
	return s.Run, nil
}

// config merges the --config file and the flags into a proxy.Config.
func (o *proxyOptions) config(fs *pflag.FlagSet) (proxy.Config, error) {
	if o.configFile != "" {
		fc, err := readKubeProxyConfig(o.configFile)
		if err != nil {
			return proxy.Config{}, err
		}
		fc.applyTo(o, fs)
	}
	cfg := proxy.Config{
		NodeName:          o.hostname,
		NodePortAddresses: o.nodePortAddrs,
		MasqueradeAll:     o.masqueradeAll,
		SyncPeriod:        o.syncPeriod,
		MinSyncPeriod:     o.minSyncPeriod,
	}
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return cfg, fmt.Errorf("--hostname-override not given and host name unknown: %w", err)
		}
		cfg.NodeName = strings.ToLower(h)
	}
	if o.clusterCIDR != "" {
		for _, s := range strings.Split(o.clusterCIDR, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				return cfg, fmt.Errorf("--cluster-cidr %q: %w", o.clusterCIDR, err)
			}
			cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, p.Masked())
		}
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// cleanupPodRoutes removes the routes --pod-routes made (protocol 154), and
// only those.
func cleanupPodRoutes(ctx context.Context) (int, error) {
	k, err := podroutes.NewNetlink()
	if err != nil {
		return 0, err
	}
	defer k.Close()
	return podroutes.Cleanup(ctx, k)
}

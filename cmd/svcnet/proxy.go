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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/dataplane/planes"
	"github.com/svcnet/svcnet/internal/dataplane/userspace"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
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
	state           stateFlags
	configFile      string
	hostname        string
	clusterCIDR     string
	nodePortAddrs   []string
	masqueradeAll   bool
	masqueradeBit   int
	egress          egressOptions
	detectLocalMode string
	// podBridgeInterface and podInterfacePrefix are the detect-local
	// modes' interface (--pod-bridge-interface, --pod-interface-name-prefix).
	podBridgeInterface string
	podInterfacePrefix string
	// masqueradeBitField is the --config field that set masqueradeBit
	// ("" when the file did not).
	masqueradeBitField string
	conntrack          conntrackOptions
	healthzAddr        string
	metricsAddr        string
	profiling          bool
	memoryLimit        string
	syncPeriod         time.Duration
	minSyncPeriod      time.Duration
	serviceProxyName   string
	eventFile          string // --event-file: where a proxy without a cluster keeps its events
	cleanup            bool
	initOnly           bool
	podRoutes          bool
	dataPlane          string
	cgroup             string
	bpfPinDir          string
	ebpfScheduler      string
	ebpfExternal       bool
	announce           announceOptions
	verbosity          int
	// warnings are set by config: one line per setting of the --config
	// file or the flags that svcnet does not apply as given.
	warnings []string
}

// conntrackOptions are the --conntrack-* flags (KubeProxyConntrackConfiguration).
type conntrackOptions struct {
	maxPerCore, min              int32
	tcpEstablished, tcpCloseWait time.Duration
	beLiberal                    bool
	udp, udpStream               time.Duration
	// fromFile is set when the --config file has conntrack settings.
	fromFile bool
}

// sysctls returns the conntrack sysctls the options ask for.
func (c conntrackOptions) sysctls() conntrack.SysctlConfig {
	return conntrack.SysctlConfig{
		MaxPerCore: int(c.maxPerCore), Min: int(c.min),
		TCPEstablishedTimeout: c.tcpEstablished, TCPCloseWaitTimeout: c.tcpCloseWait,
		TCPBeLiberal: c.beLiberal, UDPTimeout: c.udp, UDPStreamTimeout: c.udpStream,
	}
}

// bind binds the --conntrack-* flags with kube-proxy's names and defaults.
func (c *conntrackOptions) bind(fs *pflag.FlagSet) {
	def := conntrack.DefaultSysctlConfig()
	fs.Int32Var(&c.maxPerCore, "conntrack-max-per-core", int32(def.MaxPerCore), "conntrack entries per CPU: nf_conntrack_max = max(this × CPUs, --conntrack-min); 0 leaves nf_conntrack_max alone (it is read-only inside a network namespace: a warning, not a failure)")
	fs.Int32Var(&c.min, "conntrack-min", int32(def.Min), "the least nf_conntrack_max to set, whatever --conntrack-max-per-core gives")
	fs.DurationVar(&c.tcpEstablished, "conntrack-tcp-timeout-established", def.TCPEstablishedTimeout, "idle timeout of established TCP conntrack entries (0 leaves it)")
	fs.DurationVar(&c.tcpCloseWait, "conntrack-tcp-timeout-close-wait", def.TCPCloseWaitTimeout, "timeout of TCP conntrack entries in CLOSE_WAIT (0 leaves it)")
	fs.BoolVar(&c.beLiberal, "conntrack-tcp-be-liberal", false, "set nf_conntrack_tcp_be_liberal: out-of-window TCP packets are not marked INVALID")
	fs.DurationVar(&c.udp, "conntrack-udp-timeout", 0, "idle timeout of UDP conntrack entries without a reply (0 leaves it)")
	fs.DurationVar(&c.udpStream, "conntrack-udp-timeout-stream", 0, "idle timeout of assured UDP conntrack entries (0 leaves it)")
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
with kube-proxy's names; as kube-proxy's, /healthz answers 503 while this
node's Node is unknown, being deleted or tainted ToBeDeletedByClusterAutoscaler.

With --data-plane none it programs no Service at all (no nftables table, no
healthCheckNodePort) and runs only --pod-routes and --announce, beside another
Service proxy such as kube-proxy; /healthz then answers 200 once the state is
synced and the Node known and eligible.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.state.bind(fs)
	fs.StringVar(&o.configFile, "config", "", "KubeProxyConfiguration YAML file; flags given on the command line override it")
	fs.StringVar(&o.hostname, "hostname-override", "", "this node's name (default: the host name)")
	fs.StringVar(&o.clusterCIDR, "cluster-cidr", "", "pod CIDR(s), comma-separated, one per family: with --detect-local-mode ClusterCIDR (the default), traffic from outside them to ClusterIPs is masqueraded")
	fs.StringSliceVar(&o.nodePortAddrs, "nodeport-addresses", nil, `CIDRs of the node addresses that serve NodePorts, or "primary" (default: primary)`)
	fs.BoolVar(&o.masqueradeAll, "masquerade-all", false, "masquerade all traffic sent to ClusterIPs")
	fs.IntVar(&o.masqueradeBit, "masquerade-bit", 14, "the bit of the packet mark (0-31) that asks for SNAT (kube-proxy's masqueradeBit: 14 is 0x4000)")
	fs.IntVar(&o.masqueradeBit, "iptables-masquerade-bit", 14, "kube-proxy's name for --masquerade-bit")
	fs.StringVar(&o.detectLocalMode, "detect-local-mode", string(proxy.LocalModeClusterCIDR), `how traffic from pods is told from other traffic (traffic to ClusterIPs from elsewhere is masqueraded): "ClusterCIDR" (source in --cluster-cidr), "NodeCIDR" (source in this Node's spec.podCIDRs), "BridgeInterface" (arrives on --pod-bridge-interface), "InterfaceNamePrefix" (arrives on an interface named --pod-interface-name-prefix*)`)
	fs.StringVar(&o.podBridgeInterface, "pod-bridge-interface", "", "with --detect-local-mode BridgeInterface: the pods' bridge")
	fs.StringVar(&o.podInterfacePrefix, "pod-interface-name-prefix", "", "with --detect-local-mode InterfaceNamePrefix: the prefix of the pods' interface names")
	o.egress.bind(fs)
	o.conntrack.bind(fs)
	fs.StringVar(&o.healthzAddr, "healthz-bind-address", healthcheck.DefaultHealthzBindAddress, `address:port for /healthz and /livez ("" disables)`)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "127.0.0.1:10249", `address:port for /metrics ("" disables)`)
	fs.DurationVar(&o.syncPeriod, "sync-period", proxy.DefaultSyncPeriod, "maximum time between full syncs (drift repair)")
	fs.DurationVar(&o.minSyncPeriod, "min-sync-period", proxy.DefaultMinSyncPeriod, "minimum time between syncs: changes within it are coalesced")
	fs.StringVar(&o.eventFile, "event-file", "", "with --state: keep the events about Services this node does not serve in this file (a JSON EventList); with a cluster they go to its API server")
	fs.StringVar(&o.serviceProxyName, "service-proxy-name", "", "serve only Services labelled service.kubernetes.io/service-proxy-name=NAME (default: only unlabelled ones, as kube-proxy)")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go profiles under /debug/pprof/ on the metrics address")
	fs.StringVar(&o.memoryLimit, "memory-limit", memoryLimitAuto, `Go soft memory limit: "auto" derives it from the live heap after each sync (lifted during full syncs; GOMEMLIMIT, when set, wins), "none" leaves the runtime's defaults, a quantity (256Mi) fixes it`)
	fs.BoolVar(&o.cleanup, "cleanup", false, "remove everything svcnet proxy programmed, then exit")
	fs.BoolVar(&o.initOnly, "init-only", false, "do what needs full privileges (the conntrack sysctls: /proc/sys is read-only in an unprivileged container), then exit; run it as a privileged init container and svcnet proxy itself with NET_ADMIN and NET_RAW only (kube-proxy's --init-only)")
	fs.BoolVar(&o.podRoutes, "pod-routes", false, "route other nodes' pod CIDRs via their InternalIPs (host-gw; routes of protocol 154 in the main table)")
	fs.StringVar(&o.dataPlane, "data-plane", planes.Default, `Service data plane: "nftables" programs Services in nftables tables; "iptables" in kube-proxy's iptables chains (iptables-restore); "userspace" proxies them in this process (kube-proxy's old userspace mode, with retries); "ebpf" translates connects of the processes in --cgroup to an endpoint in BPF, and connections from outside the node in tc programs (--ebpf-external), over the nftables rules for all other traffic; "none" programs none (no nftables table, no healthCheckNodePorts) and runs only --pod-routes and --announce, beside another Service proxy such as kube-proxy`)
	fs.StringVar(&o.cgroup, "cgroup", "", `with --data-plane ebpf: the cgroup v2 path (as /proc/PID/cgroup names it, e.g. /kubepods) whose processes' connects to Services are translated in BPF; svcnet mounts the cgroup2 hierarchy at /run/svcnet/cgroup2 if its mount namespace has none (default: /, every process of the node)`)
	fs.StringVar(&o.ebpfScheduler, "ebpf-scheduler", string(socklb.Random), `with --data-plane ebpf: how an endpoint is chosen per connect for Services without the svcnet.io/scheduler annotation: "random", "rr" (round robin), "sh" (source hash: by the client's network namespace), "lc" (least connection) or "maglev" (connections from outside the node by Maglev consistent hashing of the flow, the same on every node; connects on the node at random)`)
	fs.BoolVar(&o.ebpfExternal, "ebpf-external", true, `with --data-plane ebpf: balance connections from outside the node to NodePorts, externalIPs and LoadBalancer IPs in tc programs (tcx, else clsact) on the interfaces holding the NodePort addresses, with a connection table of their own (the default); --ebpf-external=false leaves them to the nftables rules`)
	fs.StringVar(&o.bpfPinDir, "bpf-pin-dir", defaultBPFPinDir, `with --data-plane ebpf: the directory of a BPF filesystem where the socket load balancer is pinned, so that a restarted proxy adopts it and no connect goes untranslated in between ("" pins nothing; the default pins nothing when /sys/fs/bpf is no BPF filesystem)`)
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
		return runCleanup(ctx, o.planeOptions(log), log)
	}
	cfg, err := o.config(cmd.Flags())
	if err != nil {
		return err
	}
	setVerbosity(o.verbosity) // the --config file's logging.verbosity
	if o.initOnly {
		return o.runInitOnly(log)
	}
	if err := o.state.validateInCluster(); err != nil {
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
	for _, w := range o.warnings {
		klog.Warning(w)
	}
	noHeapProfilesUnless(o.profiling)
	mem, err := newMemoryPolicy(o.memoryLimit, !o.state.cluster(), runtimeMemory{}, log.WithName("memory"))
	if err != nil {
		return err
	}

	store := model.NewStore()
	m := metrics.New()
	health := proxyHealthServer(o.healthzAddr, cfg, store, m, log)
	// The Service data plane, or with --data-plane none what stands for it:
	// healthy once the state is synced.
	dataPlane := []func(context.Context) error{func(ctx context.Context) error {
		return reportSynced(ctx, store, health, cfg.Families)
	}}
	// synced, with a data plane, tells the manifests' source when their
	// first load is programmed.
	var synced *programmedSignal
	if o.dataPlane != planes.None {
		o.applySysctls(log)
		events, stopEvents, err := o.eventRecorder(ctx, cfg.NodeName, log)
		if err != nil {
			return err
		}
		defer stopEvents()
		synced = newProgrammedSignal()
		runners, closeAll, err := serviceDataPlane(o.dataPlane, o.planeOptions(log), cfg, store, health, m, mem, synced, events, log)
		if err != nil {
			return err
		}
		defer closeAll()
		dataPlane = runners
	}
	src, err := o.source(store, synced, m.Registry(), log)
	if err != nil {
		return err
	}
	fams := make([]string, len(cfg.Families))
	for i, f := range cfg.Families {
		fams[i] = f.String()
	}
	log.Info("starting", "node", cfg.NodeName, "dataPlane", o.dataPlane, "families", fams, "nodePortAddresses", cfg.NodePortAddresses,
		"detectLocalMode", cfg.DetectLocalMode, "clusterCIDRs", cfg.ClusterCIDRs, "masqueradeMark", fmt.Sprintf("%#x", cfg.MasqueradeMark),
		"egressMasquerade", egressSummary(cfg), "syncPeriod", cfg.SyncPeriod, "minSyncPeriod", cfg.MinSyncPeriod)
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
			return o.announce.runSpeaker(gctx, store, cfg.NodeName, m, log)
		})
	}
	if o.healthzAddr != "" {
		g.Go(func() error { return health.Run(gctx) })
	}
	if o.metricsAddr != "" {
		g.Go(func() error {
			return metrics.NewServer(o.metricsAddr, m, log.WithName("metrics"), metrics.ServerOptions{ProxyMode: o.dataPlane, Profiling: o.profiling}).Run(gctx)
		})
	}
	err = g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// proxyHealthServer returns the /healthz and /livez server of svcnet proxy:
// /healthz also answers whether this node's Node, as the store last saw it,
// may take load-balanced traffic (healthcheck.NodeEligible).
func proxyHealthServer(addr string, cfg proxy.Config, store *model.Store, m *metrics.Metrics, log klog.Logger) *healthcheck.ProxyHealthServer {
	return healthcheck.NewProxyHealthServer(healthcheck.ProxyHealthConfig{
		Addr:          addr,
		HealthTimeout: healthcheck.HealthTimeout(cfg.SyncPeriod),
		NodeEligible: func() bool {
			return healthcheck.NodeEligible(store.Snapshot().Node(cfg.NodeName))
		},
		Probes: m,
		Logger: log.WithName("healthz"),
	})
}

// applySysctls sets the conntrack sysctls the options ask for; one that
// cannot be set is a warning, never a failure (conntrack.ApplySysctls).
func (o *proxyOptions) applySysctls(log klog.Logger) []conntrack.Warning {
	ws := conntrack.ApplySysctls(conntrack.ProcFiles{}, o.conntrack.sysctls(), conntrack.OnlineCPUs(), log.WithName("conntrack"))
	for _, w := range ws {
		klog.Warning(w.Text)
	}
	return ws
}

// runInitOnly is --init-only: the privileged part of starting, then exit. It
// fails when a sysctl other than the machine-wide ones (nf_conntrack_max and
// the hash size, read-only inside a network namespace) could not be set: a
// privileged init container that cannot write them is misconfigured.
func (o *proxyOptions) runInitOnly(log klog.Logger) error {
	if err := o.validateDataPlane(); err != nil {
		return err
	}
	if o.dataPlane == planes.None {
		log.Info("nothing to initialize", "dataPlane", o.dataPlane)
		return nil
	}
	var failed []string
	for _, w := range o.applySysctls(log) {
		if !w.MachineWide() {
			failed = append(failed, w.Text)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("--init-only: %s", strings.Join(failed, "; "))
	}
	log.Info("initialized: conntrack sysctls set")
	return nil
}

// runCleanup is --cleanup: it removes what every data plane programmed
// (svcnet's nftables tables) and svcnet's pod routes.
func runCleanup(ctx context.Context, opt planes.Options, log klog.Logger) error {
	if err := planes.Cleanup(ctx, opt); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	log.Info("removed what svcnet's data planes programmed")
	n, err := cleanupPodRoutes(ctx)
	if err != nil {
		return err
	}
	log.Info("removed svcnet's pod routes", "routes", n)
	return nil
}

// source returns the run function of the state's source; a file source's
// first writes wait for synced when it is not nil (file.Source.WriteAfter),
// and its metrics are registered on reg.
func (o *proxyOptions) source(store *model.Store, synced *programmedSignal, reg prometheus.Registerer, log klog.Logger) (func(context.Context) error, error) {
	if o.state.cluster() {
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
	s := file.New(file.Options{Path: o.state.state, Config: cp, ServiceProxyName: o.serviceProxyName, Metrics: fileSourceMetrics(reg)}, store, log)
	if synced != nil {
		s.WriteAfter(synced.programmed())
	}
	return s.Run, nil
}

// config merges the --config file and the flags into a proxy.Config.
func (o *proxyOptions) config(fs *pflag.FlagSet) (proxy.Config, error) {
	o.warnings = nil
	if o.configFile != "" {
		fc, err := readKubeProxyConfig(o.configFile)
		if err != nil {
			return proxy.Config{}, err
		}
		fc.applyTo(o, fs)
		o.warnings = append(o.warnings, fc.warnings...)
	}
	if o.masqueradeBit < 0 || o.masqueradeBit > 31 {
		return proxy.Config{}, fmt.Errorf("--masquerade-bit %d: must be within [0, 31]", o.masqueradeBit)
	}
	cfg := proxy.Config{
		NodeName:               o.hostname,
		NodePortAddresses:      o.nodePortAddrs,
		MasqueradeAll:          o.masqueradeAll,
		MasqueradeMark:         1 << o.masqueradeBit,
		DetectLocalMode:        proxy.LocalMode(o.detectLocalMode),
		PodBridgeInterface:     o.podBridgeInterface,
		PodInterfaceNamePrefix: o.podInterfacePrefix,
		SyncPeriod:             o.syncPeriod,
		MinSyncPeriod:          o.minSyncPeriod,
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
	svcCIDRs, err := o.state.knownServiceCIDRs(fs)
	if err != nil {
		return cfg, err
	}
	if err := o.egressConfig(&cfg, svcCIDRs); err != nil {
		return cfg, err
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	o.warnings = append(o.warnings, o.unusedSettings(fs, cfg)...)
	o.warnings = append(o.warnings, o.egressWarnings(fs, cfg)...)
	return cfg, nil
}

// unusedSettings names the settings (flag, or --config field) that the
// merged configuration leaves unused, as kube-proxy would, with the reason.
func (o *proxyOptions) unusedSettings(fs *pflag.FlagSet, cfg proxy.Config) []string {
	var out []string
	unused := func(flag, field, value, why string) {
		out = append(out, fmt.Sprintf("--%s (%s) %q: not used: %s", flag, field, value, why))
	}
	mode := fmt.Sprintf("detect-local-mode is %s", cfg.DetectLocalMode)
	if o.clusterCIDR != "" && cfg.DetectLocalMode != proxy.LocalModeClusterCIDR && (!cfg.EgressMasquerade || o.dataPlane == planes.None) {
		unused("cluster-cidr", "clusterCIDR", o.clusterCIDR, mode+" and egress masquerade is off")
	}
	if o.podBridgeInterface != "" && cfg.DetectLocalMode != proxy.LocalModeBridgeInterface {
		unused("pod-bridge-interface", "detectLocal.bridgeInterface", o.podBridgeInterface, mode)
	}
	if o.podInterfacePrefix != "" && cfg.DetectLocalMode != proxy.LocalModeInterfaceNamePrefix {
		unused("pod-interface-name-prefix", "detectLocal.interfaceNamePrefix", o.podInterfacePrefix, mode)
	}
	if o.dataPlane == userspace.Name {
		why := "the userspace data plane has no masquerade and no packet mark"
		for _, f := range []string{"masquerade-bit", "iptables-masquerade-bit"} {
			if fs.Changed(f) {
				unused(f, "masqueradeBit", fmt.Sprint(o.masqueradeBit), why)
			}
		}
		if o.masqueradeBitField != "" {
			out = append(out, fmt.Sprintf("--config %s: %s %d: not used: %s", o.configFile, o.masqueradeBitField, o.masqueradeBit, why))
		}
	}
	if o.dataPlane == planes.None {
		var ct []string
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Changed && strings.HasPrefix(f.Name, "conntrack-") {
				ct = append(ct, "--"+f.Name)
			}
		})
		if o.conntrack.fromFile {
			ct = append(ct, "conntrack.*")
		}
		if len(ct) > 0 {
			out = append(out, fmt.Sprintf("%s: not applied: with --data-plane none the conntrack sysctls are left to the Service proxy beside svcnet", strings.Join(ct, ", ")))
		}
	}
	return out
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

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/dns"
	"github.com/svcnet/svcnet/internal/dns/resolv"
	"github.com/svcnet/svcnet/internal/httpserve"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/source/file"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// defaultDNSMetricsAddr is --metrics-bind-address's default: CoreDNS's
// prometheus plugin's port, on loopback.
const defaultDNSMetricsAddr = "127.0.0.1:9153"

// dnsOptions are `svcnet dns`'s flags.
type dnsOptions struct {
	state       stateFlags
	listen      string
	zone        string
	ttl         uint32
	upstreams   []string
	metricsAddr string
	syncTimeout time.Duration
	configMap   string
	verbosity   int
}

func newDNSCommand() *cobra.Command {
	o := &dnsOptions{}
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Cluster DNS by the Kubernetes DNS specification, in place of CoreDNS",
		Long: `svcnet dns answers the cluster's DNS names (<svc>.<ns>.svc.<zone>, headless
Services' endpoints, SRV for named ports, PTR, ExternalName CNAMEs, pod
records) from the same model as svcnet proxy, on UDP and TCP. Names outside
the zone go to the --upstream resolvers, or get REFUSED when there are none;
with a cluster as the source, the kube-dns ConfigMap (--config-map) can
forward domains elsewhere (stubDomains) and replace them
(upstreamNameservers), as with kube-dns.
Until the source of state has synced, names in the zone get SERVFAIL (an
error is logged every --sync-timeout while it lasts). It serves Prometheus
/metrics and /healthz (200 once synced) on --metrics-bind-address.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.state.bind(fs)
	fs.StringVar(&o.listen, "listen", dns.DefaultListen, "address:port to serve DNS on, UDP and TCP")
	fs.StringVar(&o.zone, "zone", dns.DefaultZone, "the cluster domain")
	fs.Uint32Var(&o.ttl, "ttl", dns.DefaultTTL, "TTL of the zone's records, in seconds")
	fs.StringArrayVar(&o.upstreams, "upstream", nil, "resolver (IP or IP:port) for names outside the zone, or a resolv.conf path (e.g. /etc/resolv.conf) whose nameservers are used; repeat for more, tried in order (none: such names get REFUSED)")
	fs.StringVar(&o.configMap, "config-map", defaultKubeDNSConfigMap, `with a cluster as the source: the kube-dns ConfigMap (NAMESPACE/NAME) whose stubDomains and upstreamNameservers apply while it exists, as kube-dns reads them ("" ignores it)`)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", defaultDNSMetricsAddr, `address:port for /metrics and /healthz ("" disables)`)
	fs.DurationVar(&o.syncTimeout, "sync-timeout", dns.DefaultSyncTimeout, "how long to wait for the source's first sync before logging errors (names in the zone get SERVFAIL until it comes)")
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity")
	return cmd
}

func (o *dnsOptions) run(cmd *cobra.Command) error {
	setVerbosity(o.verbosity)
	log := klog.Background()
	ctx, cancel := signalContext(cmd)
	defer cancel()
	if err := o.state.validateInCluster(); err != nil {
		return err
	}
	if o.ttl == 0 {
		return fmt.Errorf("--ttl must be at least 1 second")
	}
	if o.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.metricsAddr); err != nil {
			return fmt.Errorf("--metrics-bind-address %q: %w", o.metricsAddr, err)
		}
	}
	upstreams, err := expandUpstreams(o.upstreams)
	if err != nil {
		return err
	}
	store := model.NewStore()
	srv, err := dns.NewServer(dns.ServerConfig{
		Listen:      o.listen,
		Zone:        o.zone,
		TTL:         o.ttl,
		Upstreams:   upstreams,
		SyncTimeout: o.syncTimeout,
		Logger:      log,
	}, store)
	if err != nil {
		return err
	}
	src, err := o.source(store, srv, srv.Metrics().Registry(), log)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return src(gctx) })
	g.Go(func() error { return srv.Run(gctx) })
	if o.metricsAddr != "" {
		g.Go(func() error { return serveDNSMetrics(gctx, o.metricsAddr, srv) })
	}
	err = g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// source returns the run function of the configured source of state. The
// kube source waits for its first sync as long as it takes (the server
// answers SERVFAIL meanwhile); it watches no Pods, as pod records are served
// without checking the Pod exists ("pods insecure"). A file source's
// metrics are registered on reg.
func (o *dnsOptions) source(store *model.Store, srv *dns.Server, reg prometheus.Registerer, log klog.Logger) (func(context.Context) error, error) {
	if o.state.cluster() {
		client, err := kube.NewClient(o.state.kubeconfig)
		if err != nil {
			return nil, err
		}
		run := kube.New(client, store, kube.Options{AllServices: true, Logger: log}).Run
		if o.configMap == "" {
			return run, nil
		}
		ns, name, err := parseConfigMapRef(o.configMap)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error { return run(gctx) })
			g.Go(func() error { return watchKubeDNSConfigMap(gctx, client, ns, name, srv, log) })
			return g.Wait()
		}, nil
	}
	cp, err := o.state.controlPlaneConfig()
	if err != nil {
		return nil, err
	}
	return file.New(file.Options{Path: o.state.state, Config: cp, AllServices: true, Metrics: fileSourceMetrics(reg)}, store, log).Run, nil
}

// serveDNSMetrics serves the server's /metrics and /healthz on addr until ctx
// ends.
func serveDNSMetrics(ctx context.Context, addr string, srv *dns.Server) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics server on %s: %w", addr, err)
	}
	if err := httpserve.Until(ctx, httpserve.New(dns.NewHTTPHandler(srv.Metrics(), srv.Ready)), l); err != nil {
		return fmt.Errorf("metrics server on %s: %w", addr, err)
	}
	return nil
}

// expandUpstreams replaces every --upstream that is a path (it starts with "/")
// by the nameservers of that resolv.conf, as CoreDNS's `forward .
// /etc/resolv.conf` does; other entries are kept for the server to check. In a
// Pod, give it a resolv.conf that does not name this server (dnsPolicy
// Default), or queries would loop.
func expandUpstreams(list []string) ([]string, error) {
	var out []string
	for _, u := range list {
		if !strings.HasPrefix(u, "/") {
			out = append(out, u)
			continue
		}
		ns, err := resolv.UpstreamsFrom(u)
		if err != nil {
			return nil, fmt.Errorf("--upstream %s: %w", u, err)
		}
		out = append(out, ns...)
	}
	return out, nil
}

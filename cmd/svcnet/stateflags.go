package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/source/file"
)

// stateFlags say where cluster state comes from: a real API server (--kubeconfig) or
// manifests run through the embedded control plane (--state), and how that control
// plane is configured. Every command that reads state binds them.
type stateFlags struct {
	kubeconfig    string
	state         string
	serviceCIDRs  string
	nodePortRange string
}

func (f *stateFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig: read state from that cluster's API server (in a Pod, without --kubeconfig and --state: the in-cluster configuration)")
	fs.StringVar(&f.state, "state", "", "manifest file or directory: read state from it through the embedded control plane")
	fs.StringVar(&f.serviceCIDRs, "service-cluster-ip-range", "10.96.0.0/12", "with --state: ClusterIP range, one CIDR or two comma-separated for dual-stack")
	fs.StringVar(&f.nodePortRange, "service-node-port-range", "30000-32767", "with --state: NodePort range")
}

// validate checks that exactly one source is named.
func (f *stateFlags) validate() error {
	switch {
	case f.kubeconfig != "" && f.state != "":
		return fmt.Errorf("--kubeconfig and --state are exclusive: name one source of state")
	case f.kubeconfig == "" && f.state == "":
		return fmt.Errorf("no source of state: give --state FILE (manifests) or --kubeconfig FILE (a cluster), or run in a Pod (in-cluster configuration)")
	}
	return nil
}

// inCluster reports whether neither source is named and this process runs in a
// Pod (KUBERNETES_SERVICE_HOST is set), so the cluster's in-cluster config is
// the source, as for any controller deployed in the cluster.
func (f *stateFlags) inCluster() bool {
	return f.kubeconfig == "" && f.state == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != ""
}

// cluster reports whether state comes from an API server: --kubeconfig, or the
// in-cluster configuration inside a Pod.
func (f *stateFlags) cluster() bool {
	return f.kubeconfig != "" || f.inCluster()
}

// validateInCluster is validate, accepting no flags inside a Pod (inCluster).
func (f *stateFlags) validateInCluster() error {
	if f.inCluster() {
		return nil
	}
	return f.validate()
}

// controlPlaneConfig parses the embedded control plane's flags.
func (f *stateFlags) controlPlaneConfig() (controlplane.Config, error) {
	var cfg controlplane.Config
	for _, c := range strings.Split(f.serviceCIDRs, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return cfg, fmt.Errorf("--service-cluster-ip-range: %w", err)
		}
		cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, p.Masked())
	}
	r, err := controlplane.ParsePortRange(f.nodePortRange)
	if err != nil {
		return cfg, fmt.Errorf("--service-node-port-range: %w", err)
	}
	cfg.NodePortRange = r
	return cfg, nil
}

// fileSourceMetrics returns a file source's metrics, registered on reg (an
// agent's /metrics).
func fileSourceMetrics(reg prometheus.Registerer) *file.Metrics {
	m := file.NewMetrics()
	reg.MustRegister(m.Collectors()...)
	return m
}

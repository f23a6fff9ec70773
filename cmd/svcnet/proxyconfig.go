package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kubeProxyConfig is the part of KubeProxyConfiguration (kubeproxy.config.k8s.io/
// v1alpha1) that svcnet proxy honours. Other fields are accepted and ignored,
// so an existing kube-proxy config file works unchanged.
type kubeProxyConfig struct {
	APIVersion         string         `json:"apiVersion"`
	Kind               string         `json:"kind"`
	HostnameOverride   string         `json:"hostnameOverride"`
	ClusterCIDR        string         `json:"clusterCIDR"`
	NodePortAddresses  []string       `json:"nodePortAddresses"`
	HealthzBindAddress *string        `json:"healthzBindAddress"`
	MetricsBindAddress *string        `json:"metricsBindAddress"`
	EnableProfiling    *bool          `json:"enableProfiling"`
	Mode               string         `json:"mode"`
	SyncPeriod         *v1.Duration   `json:"syncPeriod"`
	MinSyncPeriod      *v1.Duration   `json:"minSyncPeriod"`
	NFTables           modeSyncConfig `json:"nftables"`
	IPTables           modeSyncConfig `json:"iptables"`
	ClientConnection   clientConnConf `json:"clientConnection"`
	Conntrack          map[string]any `json:"conntrack"`
	DetectLocalMode    string         `json:"detectLocalMode"`
	Extra              map[string]any `json:"-"`
}

type modeSyncConfig struct {
	MasqueradeAll *bool        `json:"masqueradeAll"`
	SyncPeriod    *v1.Duration `json:"syncPeriod"`
	MinSyncPeriod *v1.Duration `json:"minSyncPeriod"`
}

type clientConnConf struct {
	Kubeconfig string `json:"kubeconfig"`
}

func readKubeProxyConfig(path string) (*kubeProxyConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var c kubeProxyConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	if c.Kind != "" && c.Kind != "KubeProxyConfiguration" {
		return nil, fmt.Errorf("--config %s: kind %q: want KubeProxyConfiguration", path, c.Kind)
	}
	if c.APIVersion != "" && !strings.HasPrefix(c.APIVersion, "kubeproxy.config.k8s.io/") {
		return nil, fmt.Errorf("--config %s: apiVersion %q: want kubeproxy.config.k8s.io/v1alpha1", path, c.APIVersion)
	}
	if c.Mode != "" && c.Mode != "nftables" {
		return nil, fmt.Errorf("--config %s: mode %q: svcnet proxy programs nftables only", path, c.Mode)
	}
	return &c, nil
}

// applyTo copies the file's settings into o, except for flags set on the
// command line, which win.
func (c *kubeProxyConfig) applyTo(o *proxyOptions, fs *pflag.FlagSet) {
	set := func(flag string) bool { return fs.Changed(flag) }
	if c.HostnameOverride != "" && !set("hostname-override") {
		o.hostname = c.HostnameOverride
	}
	if c.ClusterCIDR != "" && !set("cluster-cidr") {
		o.clusterCIDR = c.ClusterCIDR
	}
	if len(c.NodePortAddresses) > 0 && !set("nodeport-addresses") {
		o.nodePortAddrs = c.NodePortAddresses
	}
	if c.HealthzBindAddress != nil && !set("healthz-bind-address") {
		o.healthzAddr = *c.HealthzBindAddress
	}
	if c.MetricsBindAddress != nil && !set("metrics-bind-address") {
		o.metricsAddr = *c.MetricsBindAddress
	}
	if c.EnableProfiling != nil && !set("profiling") {
		o.profiling = *c.EnableProfiling
	}
	if c.ClientConnection.Kubeconfig != "" && !set("kubeconfig") && o.state.state == "" {
		o.state.kubeconfig = c.ClientConnection.Kubeconfig
	}
	dur := func(ds ...*v1.Duration) (time.Duration, bool) {
		for _, d := range ds {
			if d != nil && d.Duration > 0 {
				return d.Duration, true
			}
		}
		return 0, false
	}
	// nftables.* is the mode-specific setting; the top-level one (newer
	// versions) applies when it is absent.
	if d, ok := dur(c.NFTables.SyncPeriod, c.SyncPeriod); ok && !set("sync-period") {
		o.syncPeriod = d
	}
	if d, ok := dur(c.NFTables.MinSyncPeriod, c.MinSyncPeriod); ok && !set("min-sync-period") {
		o.minSyncPeriod = d
	}
	if c.NFTables.MasqueradeAll != nil && !set("masquerade-all") {
		o.masqueradeAll = *c.NFTables.MasqueradeAll
	}
}

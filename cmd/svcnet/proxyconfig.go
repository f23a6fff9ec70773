package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/svcnet/svcnet/internal/dataplane/planes"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kubeProxyConfig is the part of KubeProxyConfiguration (kubeproxy.config.k8s.io/
// v1alpha1) that svcnet proxy honours. Every other field is named in a
// warning when the file sets it (configWarnings: what svcnet does instead),
// and a field the type does not have at all is warned about as unknown, so
// an existing kube-proxy config file works unchanged and drops nothing
// silently.
type kubeProxyConfig struct {
	APIVersion         string   `json:"apiVersion"`
	Kind               string   `json:"kind"`
	HostnameOverride   string   `json:"hostnameOverride"`
	ClusterCIDR        string   `json:"clusterCIDR"`
	NodePortAddresses  []string `json:"nodePortAddresses"`
	HealthzBindAddress *string  `json:"healthzBindAddress"`
	MetricsBindAddress *string  `json:"metricsBindAddress"`
	EnableProfiling    *bool    `json:"enableProfiling"`
	Mode               string   `json:"mode"`
	// SyncPeriod and MinSyncPeriod at the top level are svcnet's shorthand
	// for nftables.syncPeriod and nftables.minSyncPeriod, which win.
	SyncPeriod       *v1.Duration    `json:"syncPeriod"`
	MinSyncPeriod    *v1.Duration    `json:"minSyncPeriod"`
	NFTables         nftablesConf    `json:"nftables"`
	IPTables         nftablesConf    `json:"iptables"`
	ClientConnection clientConnConf  `json:"clientConnection"`
	Conntrack        conntrackConf   `json:"conntrack"`
	DetectLocalMode  string          `json:"detectLocalMode"`
	DetectLocal      detectLocalConf `json:"detectLocal"`
	Logging          loggingConf     `json:"logging"`
	// EgressMasquerade is svcnet's own section (proxyegress.go).
	EgressMasquerade egressConf `json:"egressMasquerade"`
	// warnings are configWarnings of the file.
	warnings []string
}

// nftablesConf is the mode section (nftables or iptables) of the file's
// mode: the same four fields in both.
type nftablesConf struct {
	MasqueradeBit *int32       `json:"masqueradeBit"`
	MasqueradeAll *bool        `json:"masqueradeAll"`
	SyncPeriod    *v1.Duration `json:"syncPeriod"`
	MinSyncPeriod *v1.Duration `json:"minSyncPeriod"`
}

type clientConnConf struct {
	Kubeconfig string `json:"kubeconfig"`
}

// conntrackConf is KubeProxyConntrackConfiguration. Like kube-proxy, an
// absent field keeps its default; a zero one leaves the sysctl alone.
type conntrackConf struct {
	MaxPerCore            *int32       `json:"maxPerCore"`
	Min                   *int32       `json:"min"`
	TCPEstablishedTimeout *v1.Duration `json:"tcpEstablishedTimeout"`
	TCPCloseWaitTimeout   *v1.Duration `json:"tcpCloseWaitTimeout"`
	TCPBeLiberal          *bool        `json:"tcpBeLiberal"`
	UDPTimeout            *v1.Duration `json:"udpTimeout"`
	UDPStreamTimeout      *v1.Duration `json:"udpStreamTimeout"`
}

type detectLocalConf struct {
	BridgeInterface     string `json:"bridgeInterface"`
	InterfaceNamePrefix string `json:"interfaceNamePrefix"`
}

type loggingConf struct {
	Verbosity *uint32 `json:"verbosity"`
}

// Default ports kube-proxy appends to a bind address given without one.
const (
	healthzPort = 10256
	metricsPort = 10249
)

// sectionName is the mode section whose fields apply: "iptables" for mode
// iptables (kube-proxy's iptables.* settings), else "nftables" (svcnet's
// default plane, and the userspace plane's redirect rules).
func (c *kubeProxyConfig) sectionName() string {
	if c.Mode == "iptables" {
		return "iptables"
	}
	return "nftables"
}

// section returns the fields of sectionName.
func (c *kubeProxyConfig) section() nftablesConf {
	if c.Mode == "iptables" {
		return c.IPTables
	}
	return c.NFTables
}

func readKubeProxyConfig(path string) (*kubeProxyConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	// Field names match case-sensitively, as kube-proxy's decoder matches
	// them: a name in another case is an unknown field (warned about), not
	// a setting.
	var c kubeProxyConfig
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &c); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	if c.Kind != "" && c.Kind != "KubeProxyConfiguration" {
		return nil, fmt.Errorf("--config %s: kind %q: want KubeProxyConfiguration", path, c.Kind)
	}
	if c.APIVersion != "" && !strings.HasPrefix(c.APIVersion, "kubeproxy.config.k8s.io/") {
		return nil, fmt.Errorf("--config %s: apiVersion %q: want kubeproxy.config.k8s.io/v1alpha1", path, c.APIVersion)
	}
	if c.Mode == planes.IPVS {
		return nil, fmt.Errorf("--config %s: mode %q: %w", path, c.Mode, planes.Validate(c.Mode))
	}
	if c.Mode != "" {
		if err := planes.Validate(c.Mode); err != nil || c.Mode == planes.None {
			return nil, fmt.Errorf("--config %s: mode %q: want one of svcnet's data planes (%s)", path, c.Mode, strings.Join(planes.Names()[:len(planes.Names())-1], ", "))
		}
	}
	if bit := c.section().MasqueradeBit; bit != nil && (*bit < 0 || *bit > 31) {
		return nil, fmt.Errorf("--config %s: %s.masqueradeBit %d: must be within [0, 31]", path, c.sectionName(), *bit)
	}
	if err := c.EgressMasquerade.validate(path); err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	c.warnings = configWarnings(path, raw, c.sectionName())
	return &c, nil
}

// applyTo copies the file's settings into o, except for flags set on the
// command line, which win.
func (c *kubeProxyConfig) applyTo(o *proxyOptions, fs *pflag.FlagSet) {
	set := func(flags ...string) bool {
		for _, f := range flags {
			if fs.Changed(f) {
				return true
			}
		}
		return false
	}
	if c.HostnameOverride != "" && !set("hostname-override") {
		o.hostname = c.HostnameOverride
	}
	if c.ClusterCIDR != "" && !set("cluster-cidr") {
		o.clusterCIDR = c.ClusterCIDR
	}
	if len(c.NodePortAddresses) > 0 && !set("nodeport-addresses") {
		o.nodePortAddrs = c.NodePortAddresses
	}
	// As kube-proxy defaults them, an empty address in the file means the
	// default one (only the flags' "" turns a server off).
	if a := c.HealthzBindAddress; a != nil && *a != "" && !set("healthz-bind-address") {
		o.healthzAddr = withPort(*a, healthzPort)
	}
	if a := c.MetricsBindAddress; a != nil && *a != "" && !set("metrics-bind-address") {
		o.metricsAddr = withPort(*a, metricsPort)
	}
	if c.EnableProfiling != nil && !set("profiling") {
		o.profiling = *c.EnableProfiling
	}
	if c.ClientConnection.Kubeconfig != "" && !set("kubeconfig") && o.state.state == "" {
		o.state.kubeconfig = c.ClientConnection.Kubeconfig
	}
	if c.Logging.Verbosity != nil && !set("v") {
		o.verbosity = int(*c.Logging.Verbosity)
	}
	dur := func(ds ...*v1.Duration) (time.Duration, bool) {
		for _, d := range ds {
			if d != nil && d.Duration > 0 {
				return d.Duration, true
			}
		}
		return 0, false
	}
	if c.Mode != "" && !set("data-plane") {
		o.dataPlane = c.Mode
	}
	// The mode's section (nftables.* or iptables.*) is the mode-specific
	// setting; the top-level one (svcnet's shorthand) applies when it is
	// absent.
	sec := c.section()
	if d, ok := dur(sec.SyncPeriod, c.SyncPeriod); ok && !set("sync-period") {
		o.syncPeriod = d
	}
	if d, ok := dur(sec.MinSyncPeriod, c.MinSyncPeriod); ok && !set("min-sync-period") {
		o.minSyncPeriod = d
	}
	if sec.MasqueradeAll != nil && !set("masquerade-all") {
		o.masqueradeAll = *sec.MasqueradeAll
	}
	if sec.MasqueradeBit != nil && !set("masquerade-bit", "iptables-masquerade-bit") {
		o.masqueradeBit = int(*sec.MasqueradeBit)
	}
	if c.DetectLocalMode != "" && !set("detect-local-mode") {
		o.detectLocalMode = c.DetectLocalMode
	}
	if c.DetectLocal.BridgeInterface != "" && !set("pod-bridge-interface") {
		o.podBridgeInterface = c.DetectLocal.BridgeInterface
	}
	if c.DetectLocal.InterfaceNamePrefix != "" && !set("pod-interface-name-prefix") {
		o.podInterfacePrefix = c.DetectLocal.InterfaceNamePrefix
	}
	c.Conntrack.applyTo(&o.conntrack, set)
	c.EgressMasquerade.applyTo(&o.egress, o.configFile, set)
}

// applyTo copies the file's conntrack settings into ct, except for flags
// set on the command line.
func (c conntrackConf) applyTo(ct *conntrackOptions, set func(...string) bool) {
	if c.MaxPerCore != nil && !set("conntrack-max-per-core") {
		ct.maxPerCore = *c.MaxPerCore
	}
	if c.Min != nil && !set("conntrack-min") {
		ct.min = *c.Min
	}
	for _, d := range []struct {
		from *v1.Duration
		to   *time.Duration
		flag string
	}{
		{c.TCPEstablishedTimeout, &ct.tcpEstablished, "conntrack-tcp-timeout-established"},
		{c.TCPCloseWaitTimeout, &ct.tcpCloseWait, "conntrack-tcp-timeout-close-wait"},
		{c.UDPTimeout, &ct.udp, "conntrack-udp-timeout"},
		{c.UDPStreamTimeout, &ct.udpStream, "conntrack-udp-timeout-stream"},
	} {
		if d.from != nil && !set(d.flag) {
			*d.to = d.from.Duration
		}
	}
	if c.TCPBeLiberal != nil && !set("conntrack-tcp-be-liberal") {
		ct.beLiberal = *c.TCPBeLiberal
	}
	ct.fromFile = c != (conntrackConf{})
}

// withPort appends port to a bind address given without one, as kube-proxy
// does for healthzBindAddress and metricsBindAddress.
func withPort(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(port))
}

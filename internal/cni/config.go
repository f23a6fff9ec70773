package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/svcnet/svcnet/internal/cni/hostport"
)

// Defaults of the configuration.
const (
	DefaultBridge  = "cni0"
	DefaultMTU     = 1500
	DefaultDataDir = "/var/lib/cni/networks" // + "/<network name>"
)

// defaultDataDir is DefaultDataDir; tests point it into a directory of theirs.
var defaultDataDir = DefaultDataDir

// netConf is the plugin configuration as it arrives on stdin.
type netConf struct {
	types.PluginConf
	Bridge        string        `json:"bridge"`
	MTU           int           `json:"mtu"`
	Subnets       []string      `json:"subnets"`
	DataDir       string        `json:"dataDir"`
	RuntimeConfig runtimeConfig `json:"runtimeConfig"`
	// The spec's first name for the GC list (containernetworking/cni#1101);
	// libcni sends both.
	Attachments []types.GCAttachment `json:"cni.dev/attachments,omitempty"`
	// rawValid tells an absent valid-attachments list from an empty one.
	RawValid json.RawMessage `json:"cni.dev/valid-attachments,omitempty"`
}

type runtimeConfig struct {
	PortMappings []portMapping `json:"portMappings,omitempty"`
}

// portMapping is one entry of the portMappings capability, as runtimes send it.
type portMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Config is a validated plugin configuration with defaults applied.
type Config struct {
	CNIVersion string
	Name       string
	Bridge     string
	// MTU is the configured MTU; 0 when not configured (the plugin then uses
	// the MTU of the node's default-route interface, else DefaultMTU).
	MTU int
	// Subnets are the node's pod CIDRs, masked, at most one per family, in
	// the configured order.
	Subnets      []netip.Prefix
	DataDir      string
	PortMappings []hostport.Mapping
	DNS          types.DNS
	// PrevResult is the converted prevResult, nil when none was given.
	PrevResult *types100.Result
	// ValidAttachments is GC's list of attachments to keep (absent: none).
	ValidAttachments []types.GCAttachment
}

// ParseConfig decodes and validates a plugin configuration. Its errors are
// *types.Error: ErrDecodingFailure for bad JSON or prevResult,
// ErrInvalidNetworkConfig naming the bad field and value otherwise.
func ParseConfig(data []byte) (*Config, error) {
	var nc netConf
	if err := json.Unmarshal(data, &nc); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cannot decode network configuration", err.Error())
	}
	c := &Config{
		CNIVersion: nc.CNIVersion,
		Name:       nc.Name,
		Bridge:     nc.Bridge,
		MTU:        nc.MTU,
		DataDir:    nc.DataDir,
		DNS:        nc.DNS,
	}
	bad := func(format string, args ...any) error {
		return types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration", fmt.Sprintf("network %q: ", nc.Name)+fmt.Sprintf(format, args...))
	}
	if err := validateNetworkName(c.Name); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration", err.Error())
	}
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if p := ifNameProblem(c.Bridge); p != "" {
		return nil, bad("bridge %s: %s", quote(c.Bridge), p)
	}
	if c.MTU != 0 && (c.MTU < 68 || c.MTU > 65535) {
		return nil, bad("mtu %d: want 68..65535", c.MTU)
	}
	if len(nc.Subnets) == 0 {
		return nil, bad("subnets: at least one subnet (the node's pod CIDR) is required")
	}
	seen := map[bool]string{}
	for _, s := range nc.Subnets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, bad("subnets: %q is not a CIDR", s)
		}
		if p != p.Masked() {
			return nil, bad("subnets: %s is not a network address (did you mean %s?)", s, p.Masked())
		}
		if p.Addr().Zone() != "" || p.Addr().Is4In6() {
			return nil, bad("subnets: %s: want a plain IPv4 or IPv6 network", s)
		}
		if p.Addr().BitLen()-p.Bits() < 2 {
			return nil, bad("subnets: %s is too small (no address besides the gateway)", s)
		}
		if other, dup := seen[p.Addr().Is4()]; dup {
			return nil, bad("subnets: %s and %s are of one family; give at most one per family", other, s)
		}
		if p.Addr().Is6() && c.MTU != 0 && c.MTU < 1280 {
			return nil, bad("mtu %d is below IPv6's minimum of 1280 (subnet %s)", c.MTU, s)
		}
		seen[p.Addr().Is4()] = s
		c.Subnets = append(c.Subnets, p)
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(defaultDataDir, c.Name)
	}
	if err := validateDataDir(c.DataDir); err != nil {
		return nil, bad("%v", err)
	}
	ms, err := parseMappings(nc.RuntimeConfig.PortMappings)
	if err != nil {
		return nil, bad("%v", err)
	}
	c.PortMappings = ms
	if nc.RawValid != nil {
		if err := json.Unmarshal(nc.RawValid, &c.ValidAttachments); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "cannot decode cni.dev/valid-attachments", err.Error())
		}
	} else {
		c.ValidAttachments = nc.Attachments
	}
	if err := validateGCAttachments(c.ValidAttachments); err != nil {
		return nil, bad("%v", err)
	}
	if nc.RawPrevResult != nil {
		if err := version.ParsePrevResult(&nc.PluginConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "cannot decode prevResult", err.Error())
		}
		r, err := types100.NewResultFromResult(nc.PrevResult)
		if err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "cannot convert prevResult", err.Error())
		}
		c.PrevResult = r
	}
	return c, nil
}

// parseMappings validates the portMappings capability.
func parseMappings(in []portMapping) ([]hostport.Mapping, error) {
	var out []hostport.Mapping
	seen := map[string]int{}
	for i, pm := range in {
		field := fmt.Sprintf("runtimeConfig.portMappings[%d]", i)
		if pm.HostPort < 1 || pm.HostPort > 65535 {
			return nil, fmt.Errorf("%s: hostPort %d: want 1..65535", field, pm.HostPort)
		}
		if pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
			return nil, fmt.Errorf("%s: containerPort %d: want 1..65535", field, pm.ContainerPort)
		}
		proto, err := hostport.ParseProtocol(pm.Protocol)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", field, err)
		}
		m := hostport.Mapping{HostPort: uint16(pm.HostPort), Protocol: proto, ContainerPort: uint16(pm.ContainerPort)}
		if pm.HostIP != "" {
			a, err := netip.ParseAddr(pm.HostIP)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%s: hostIP %q is not an IP address", field, pm.HostIP)
			}
			if !a.IsUnspecified() { // 0.0.0.0 and :: mean every address
				m.HostIP = a.Unmap()
			}
		}
		key := fmt.Sprintf("%s/%d/%d", m.HostIP, m.Protocol, m.HostPort)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s: hostPort %s repeats runtimeConfig.portMappings[%d]", field, m, j)
		}
		seen[key] = i
		out = append(out, m)
	}
	return out, nil
}

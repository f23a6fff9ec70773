package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/containernetworking/cni/libcni"
)

// PluginType is the plugin's "type" in a network configuration: the name of
// the binary a runtime looks up in CNI_PATH.
const PluginType = "svcnet"

// DefaultNetwork is the name of the network svcnet's conflist defines.
const DefaultNetwork = "svcnet"

// ListOptions describe the network configuration list (conflist) of one node:
// svcnet's network with the node's pod CIDRs.
type ListOptions struct {
	// CNIVersion is the list's cniVersion: the version of the results the
	// runtime parses (it must be one the plugin speaks, VersionInfo).
	CNIVersion string
	// Name is the network's name; DefaultNetwork when empty.
	Name string
	// Subnets are the node's pod CIDRs (spec.podCIDRs), at most one per
	// family.
	Subnets []netip.Prefix
	// Bridge, MTU and DataDir are the plugin's fields of the same names;
	// empty or zero leaves them out (the plugin's defaults apply).
	Bridge  string
	MTU     int
	DataDir string
}

// confList is the conflist as written: fields in this order, so the same
// options give byte-identical files.
type confList struct {
	CNIVersion string       `json:"cniVersion"`
	Name       string       `json:"name"`
	Plugins    []pluginConf `json:"plugins"`
}

type pluginConf struct {
	Type         string          `json:"type"`
	Bridge       string          `json:"bridge,omitempty"`
	MTU          int             `json:"mtu,omitempty"`
	Subnets      []string        `json:"subnets"`
	DataDir      string          `json:"dataDir,omitempty"`
	Capabilities map[string]bool `json:"capabilities"`
}

// ConfList renders the conflist of o: one plugin, svcnet, with the
// portMappings capability (hostPorts). The result is checked as the runtime
// and the plugin will read it: libcni parses it, and the plugin's own
// ParseConfig accepts the plugin's configuration as libcni hands it over
// (with the list's name and cniVersion), so a bad subnet or name is refused
// here with the plugin's reason instead of on the node's first pod.
func ConfList(o ListOptions) ([]byte, error) {
	if o.Name == "" {
		o.Name = DefaultNetwork
	}
	if !slices.Contains(VersionInfo().SupportedVersions(), o.CNIVersion) {
		return nil, fmt.Errorf("network %s: cniVersion %q: want one of %v", o.Name, o.CNIVersion, VersionInfo().SupportedVersions())
	}
	p := pluginConf{
		Type: PluginType, Bridge: o.Bridge, MTU: o.MTU, DataDir: o.DataDir,
		Capabilities: map[string]bool{"portMappings": true},
	}
	for _, s := range o.Subnets {
		p.Subnets = append(p.Subnets, s.String())
	}
	b, err := json.MarshalIndent(confList{CNIVersion: o.CNIVersion, Name: o.Name, Plugins: []pluginConf{p}}, "", "  ")
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", o.Name, err)
	}
	for _, pl := range list.Plugins {
		// What libcni passes the plugin: its configuration with the list's
		// name and cniVersion.
		conf, err := libcni.InjectConf(pl, map[string]any{"name": list.Name, "cniVersion": list.CNIVersion})
		if err != nil {
			return nil, fmt.Errorf("network %s: %w", o.Name, err)
		}
		if _, err := ParseConfig(conf.Bytes); err != nil {
			return nil, fmt.Errorf("network %s: %w", o.Name, err)
		}
	}
	return b, nil
}

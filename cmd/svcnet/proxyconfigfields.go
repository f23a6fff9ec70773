package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// configField is one field of KubeProxyConfiguration v1alpha1
// (k8s.io/kube-proxy/config/v1alpha1, by its JSON path) and what svcnet
// proxy does with it.
type configField struct {
	path string
	// instead is empty for a field svcnet proxy honours (applyTo reads it);
	// otherwise it says what svcnet does instead, and the field is named in
	// a warning whenever the file sets it.
	instead string
	// nullable fields (pointers in kube-proxy's type) are set by any value
	// but null, zero included: oomScoreAdj: 0 is a setting. Others are set
	// by a value that is not their zero value, which means what absence
	// means (kube-proxy defaults it).
	nullable bool
	// same lists values (as fmt.Sprint prints the JSON value) that ask for
	// what svcnet does anyway: no warning for them.
	same []string
	// svcnet marks svcnet's own fields, which KubeProxyConfiguration does
	// not have (kube-proxy would warn that they are unknown).
	svcnet bool
}

const (
	notIPVS     = "svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"
	windowsOnly = "Windows only (svcnet proxy runs on Linux); ignored"
)

// kubeProxyFields lists every field of KubeProxyConfiguration v1alpha1
// (kube-proxy v1.36) that is not a section of others, plus svcnet's
// top-level syncPeriod and minSyncPeriod.
var kubeProxyFields = []configField{
	{path: "apiVersion"},
	{path: "kind"},
	{path: "featureGates", instead: "svcnet proxy has no feature gates: what it implements is always on; ignored"},
	{path: "clientConnection.kubeconfig"},
	{path: "clientConnection.acceptContentTypes", same: []string{"application/vnd.kubernetes.protobuf,application/json"},
		instead: "svcnet accepts protobuf, then JSON; ignored"},
	{path: "clientConnection.contentType", same: []string{"application/vnd.kubernetes.protobuf"},
		instead: "svcnet sends protobuf; ignored"},
	{path: "clientConnection.qps", same: []string{"5"},
		instead: "svcnet's client keeps client-go's limits (5 requests/s, burst 10: svcnet proxy only lists and watches); ignored"},
	{path: "clientConnection.burst", same: []string{"10"},
		instead: "svcnet's client keeps client-go's limits (5 requests/s, burst 10: svcnet proxy only lists and watches); ignored"},
	{path: "logging.format", same: []string{"text"}, instead: "svcnet logs klog text; ignored"},
	{path: "logging.flushFrequency", instead: "klog flushes on its own schedule (every 5s); ignored"},
	{path: "logging.verbosity"},
	{path: "logging.vmodule", instead: "svcnet has no per-file verbosity: logging.verbosity (-v) applies to all; ignored"},
	{path: "logging.options", instead: "svcnet logs klog text, without format options; ignored"},
	{path: "hostnameOverride"},
	{path: "bindAddress", same: []string{"0.0.0.0"},
		instead: "svcnet takes the node's addresses from its Node object, and binds healthzBindAddress and metricsBindAddress as given; ignored"},
	{path: "healthzBindAddress"},
	{path: "metricsBindAddress"},
	{path: "bindAddressHardFail", nullable: true, same: []string{"true"},
		instead: "svcnet proxy always exits when it cannot bind the healthz or metrics address; ignored"},
	{path: "enableProfiling"},
	{path: "showHiddenMetricsForVersion", instead: "svcnet has no hidden (deprecated) metrics to show; ignored"},
	{path: "mode"},
	{path: "iptables.masqueradeBit", nullable: true},
	{path: "iptables.masqueradeAll"},
	{path: "iptables.localhostNodePorts", nullable: true, same: []string{"false"},
		instead: "svcnet never serves NodePorts on localhost (CVE-2020-8558), as kube-proxy's nftables mode; ignored"},
	{path: "iptables.syncPeriod"},
	{path: "iptables.minSyncPeriod"},
	{path: "ipvs.syncPeriod", instead: notIPVS},
	{path: "ipvs.minSyncPeriod", instead: notIPVS},
	{path: "ipvs.scheduler", instead: notIPVS},
	{path: "ipvs.excludeCIDRs", instead: notIPVS},
	{path: "ipvs.strictARP", instead: notIPVS},
	{path: "ipvs.tcpTimeout", instead: notIPVS},
	{path: "ipvs.tcpFinTimeout", instead: notIPVS},
	{path: "ipvs.udpTimeout", instead: notIPVS},
	{path: "nftables.masqueradeBit", nullable: true},
	{path: "nftables.masqueradeAll"},
	{path: "nftables.syncPeriod"},
	{path: "nftables.minSyncPeriod"},
	{path: "winkernel.networkName", instead: windowsOnly},
	{path: "winkernel.sourceVip", instead: windowsOnly},
	{path: "winkernel.enableDSR", instead: windowsOnly},
	{path: "winkernel.rootHnsEndpointName", instead: windowsOnly},
	{path: "winkernel.forwardHealthCheckVip", instead: windowsOnly},
	{path: "detectLocalMode"},
	{path: "detectLocal.bridgeInterface"},
	{path: "detectLocal.interfaceNamePrefix"},
	{path: "clusterCIDR"},
	{path: "nodePortAddresses"},
	{path: "oomScoreAdj", nullable: true,
		instead: "svcnet proxy keeps the OOM score it was started with (set it where the process is started); ignored"},
	{path: "conntrack.maxPerCore"},
	{path: "conntrack.min"},
	{path: "conntrack.tcpEstablishedTimeout"},
	{path: "conntrack.tcpCloseWaitTimeout"},
	{path: "conntrack.tcpBeLiberal"},
	{path: "conntrack.udpTimeout"},
	{path: "conntrack.udpStreamTimeout"},
	{path: "configSyncPeriod",
		instead: "svcnet's informers do not resync (a resync re-delivers unchanged objects, which svcnet skips); nftables.syncPeriod bounds the time to repair the kernel; ignored"},
	{path: "portRange", instead: "svcnet's userspace data plane listens on proxy ports the kernel chooses, as kube-proxy's did with an empty range; ignored"},
	{path: "windowsRunAsService", instead: windowsOnly},
	// svcnet's shorthand for nftables.syncPeriod and nftables.minSyncPeriod.
	{path: "syncPeriod"},
	{path: "minSyncPeriod"},
}

// fieldIndex maps a field's path to it; sections are the paths that hold
// fields (clientConnection, conntrack, ...).
var fieldIndex, sections = func() (map[string]configField, map[string]bool) {
	idx, secs := map[string]configField{}, map[string]bool{}
	for _, f := range slices.Concat(kubeProxyFields, egressFields) {
		idx[f.path] = f
		for p := f.path; strings.Contains(p, "."); {
			p = p[:strings.LastIndex(p, ".")]
			secs[p] = true
		}
	}
	return idx, secs
}()

// configWarnings returns one line per field of the file (named as given to
// --config) that svcnet proxy does not honour and the file sets, with what
// svcnet does instead, and one per field neither KubeProxyConfiguration nor
// svcnet's own egressMasquerade section has, and one per field of the mode
// section (nftables or iptables) that is not section, the one the file's
// mode uses; in field path order.
func configWarnings(file string, doc map[string]any, section string) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			path, v := prefix+k, m[k]
			if sections[path] {
				if sub, ok := v.(map[string]any); ok {
					walk(path+".", sub)
				} else if v != nil {
					out = append(out, fmt.Sprintf("--config %s: %s: not a mapping of fields; ignored", file, path))
				}
				continue
			}
			f, known := fieldIndex[path]
			switch {
			case !known && strings.HasPrefix(path, egressSection+"."):
				out = append(out, fmt.Sprintf("--config %s: unknown field %s: svcnet's %s section has no such field (it has enabled, nonMasqueradeCIDRs, masqLinkLocal); ignored", file, path, egressSection))
			case !known:
				out = append(out, fmt.Sprintf("--config %s: unknown field %s: KubeProxyConfiguration v1alpha1 has no such field; ignored", file, path))
			case f.instead != "" && f.setBy(v):
				out = append(out, fmt.Sprintf("--config %s: %s: %s", file, path, f.instead))
			case modeSections[prefix] && prefix != section+"." && f.setBy(v):
				out = append(out, fmt.Sprintf("--config %s: %s: svcnet runs mode %s: %s.%s applies; ignored", file, path, section, section, k))
			}
		}
	}
	walk("", doc)
	return out
}

// modeSections are the prefixes of the mode-specific sections with the same
// fields: the file's mode decides which one applies.
var modeSections = map[string]bool{"nftables.": true, "iptables.": true}

// setBy reports whether value v (decoded JSON) is a setting that differs
// from what svcnet does.
func (f configField) setBy(v any) bool {
	if v == nil || slices.Contains(f.same, fmt.Sprint(v)) {
		return false
	}
	return f.nullable || !zeroValue(v)
}

// zeroValue reports whether v means what an absent field means: null,
// false, 0, "" or "0", a zero duration ("0s"), an empty list, or a mapping
// of zero values.
func zeroValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		if v == "" || v == "0" {
			return true
		}
		d, err := time.ParseDuration(v)
		return err == nil && d == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		for _, x := range v {
			if !zeroValue(x) {
				return false
			}
		}
		return true
	}
	return false
}

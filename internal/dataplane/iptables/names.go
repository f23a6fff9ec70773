package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/svcnet/svcnet/internal/servicetable"
)

// Tables of the rendered ruleset.
const (
	TableFilter = "filter"
	TableNAT    = "nat"
)

// Shared chains, as kube-proxy's iptables mode names them. KUBE-SERVICES and
// KUBE-NODEPORTS exist in both tables.
const (
	ChainServices         = "KUBE-SERVICES"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainForward          = "KUBE-FORWARD"
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"
)

// Prefixes of the per-Service-port chains (all in the nat table).
const (
	prefixCluster  = "KUBE-SVC-"
	prefixLocal    = "KUBE-SVL-"
	prefixExternal = "KUBE-EXT-"
	prefixFirewall = "KUBE-FW-"
	prefixEndpoint = "KUBE-SEP-"
)

// ServiceChainPrefixes are the prefixes of every per-Service-port chain;
// a chain in the nat table with one of them belongs to this plane.
var ServiceChainPrefixes = []string{prefixCluster, prefixLocal, prefixExternal, prefixFirewall, prefixEndpoint}

// IsServiceChain reports whether name is a per-Service-port chain name.
func IsServiceChain(name string) bool {
	for _, p := range ServiceChainPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// hash16 is kube-proxy's chain hash: the first 16 characters of the standard
// base32 encoding of the SHA-256 of s (chain names stay within iptables'
// 28-character limit).
func hash16(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// portProto is the hashed identity of a Service port: its ServicePortName
// string ("ns/name:port") followed by its protocol in lower case, as
// kube-proxy's portProtoHash.
func portProto(sp *servicetable.ServicePort) string {
	return sp.Name.String() + strings.ToLower(string(sp.Protocol))
}

// portHash is the hash a Service port's chains are named by.
func portHash(sp *servicetable.ServicePort) string { return hash16(portProto(sp)) }

// ClusterChain is the KUBE-SVC chain of a Service port: its endpoints under
// the Cluster traffic policy.
func ClusterChain(sp *servicetable.ServicePort) string { return prefixCluster + hash16(portProto(sp)) }

// LocalChain is the KUBE-SVL chain: the endpoints on this node, for the Local
// traffic policies.
func LocalChain(sp *servicetable.ServicePort) string { return prefixLocal + hash16(portProto(sp)) }

// ExternalChain is the KUBE-EXT chain: the entry of NodePort, external IP and
// load-balancer traffic.
func ExternalChain(sp *servicetable.ServicePort) string {
	return prefixExternal + hash16(portProto(sp))
}

// FirewallChain is the KUBE-FW chain: loadBalancerSourceRanges.
func FirewallChain(sp *servicetable.ServicePort) string {
	return prefixFirewall + hash16(portProto(sp))
}

// EndpointChain is the KUBE-SEP chain of one endpoint of a Service port; the
// endpoint enters the hash as "addr:port" ("[addr]:port" for IPv6), as
// kube-proxy's servicePortEndpointChainName.
func EndpointChain(sp *servicetable.ServicePort, ep servicetable.Endpoint) string {
	return prefixEndpoint + hash16(portProto(sp)+ep.String())
}

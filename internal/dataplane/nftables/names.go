package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/servicetable"
)

// TableName is the name of svcnet's table in each family.
const TableName = "svcnet"

// Names of the shared objects of the table.
const (
	mapServiceIPs          = "service-ips"
	mapServiceNodePorts    = "service-nodeports"
	mapFirewallIPs         = "firewall-ips"
	mapNoEndpointServices  = "no-endpoint-services"
	mapNoEndpointNodePorts = "no-endpoint-nodeports"
	setClusterIPs          = "cluster-ips"
	setNodePortIPs         = "nodeport-ips"

	chainServices           = "services"
	chainMarkForMasquerade  = "mark-for-masquerade"
	chainMasquerading       = "masquerading"
	chainReject             = "reject-chain"
	chainFirewallCheck      = "firewall-check"
	chainServiceEPCheck     = "service-endpoints-check"
	chainNodePortEPCheck    = "nodeport-endpoints-check"
	chainClusterIPsCheck    = "cluster-ips-check"
	chainFilterPrerouting   = "filter-prerouting"
	chainFilterInput        = "filter-input"
	chainFilterForward      = "filter-forward"
	chainFilterOutput       = "filter-output"
	chainFilterOutputPost   = "filter-output-post-dnat"
	chainNatPrerouting      = "nat-prerouting"
	chainNatOutput          = "nat-output"
	chainNatPostrouting     = "nat-postrouting"
	endpointChainSeparator  = "__"
	maxChainNameLen         = 255
	hashLen                 = 8
	readableProtocolPortSep = "/"
)

// portSuffix is the readable identity of a Service port: ns/name/proto/port,
// where port is the port's name, or its number when unnamed.
func portSuffix(sp *servicetable.ServicePort) string {
	port := sp.Name.Port
	if port == "" {
		port = strconv.Itoa(int(sp.Port))
	}
	return sp.Name.Namespace + "/" + sp.Name.Name + "/" + strings.ToLower(string(sp.Protocol)) + readableProtocolPortSep + port
}

// hashName returns prefix-HASH-readable, where HASH depends on the full
// identity, so a truncated readable part never makes two names collide.
func hashName(prefix, identity, readable string) string {
	sum := sha256.Sum256([]byte(identity))
	h := base32.StdEncoding.EncodeToString(sum[:])[:hashLen]
	n := prefix + "-" + h + "-" + readable
	if len(n) > maxChainNameLen {
		n = n[:maxChainNameLen]
	}
	return n
}

func serviceChain(sp *servicetable.ServicePort) string {
	return hashName("service", sp.ID, portSuffix(sp))
}

func localChain(sp *servicetable.ServicePort) string {
	return hashName("local", sp.ID, portSuffix(sp))
}

func externalChain(sp *servicetable.ServicePort) string {
	return hashName("external", sp.ID, portSuffix(sp))
}

func firewallChain(sp *servicetable.ServicePort) string {
	return hashName("firewall", sp.ID, portSuffix(sp))
}

func endpointSuffix(sp *servicetable.ServicePort, ep servicetable.Endpoint) string {
	return portSuffix(sp) + endpointChainSeparator + ep.Addr.String() + "/" + strconv.Itoa(int(ep.Port))
}

func endpointChain(sp *servicetable.ServicePort, ep servicetable.Endpoint) string {
	s := endpointSuffix(sp, ep)
	return hashName("endpoint", sp.ID+" "+ep.String(), s)
}

func affinitySet(sp *servicetable.ServicePort, ep servicetable.Endpoint) string {
	s := endpointSuffix(sp, ep)
	return hashName("affinity", sp.ID+" "+ep.String(), s)
}

package cni

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/nft"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"svcnet","type":"svcnet","subnets":["192.168.1.0/24"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bridge != "cni0" || c.MTU != 0 || c.DataDir != "/var/lib/cni/networks/svcnet" || len(c.PortMappings) != 0 || c.PrevResult != nil {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestParseConfigFull(t *testing.T) {
	c, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"n1","type":"svcnet","bridge":"br-pods","mtu":9000,
		"subnets":["fd00:192:168:1::/64","192.168.1.0/24"],"dataDir":"/run/x/ipam",
		"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]},
		"runtimeConfig":{"portMappings":[
			{"hostPort":8080,"containerPort":80,"protocol":"tcp"},
			{"hostPort":8080,"containerPort":80,"protocol":"UDP","hostIP":"0.0.0.0"},
			{"hostPort":9090,"containerPort":90,"protocol":"sctp","hostIP":"172.26.236.177"}]},
		"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}],
		"prevResult":{"cniVersion":"1.0.0","ips":[{"address":"192.168.1.2/32","gateway":"192.168.1.1","interface":2}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bridge != "br-pods" || c.MTU != 9000 || c.DataDir != "/run/x/ipam" {
		t.Fatalf("fields: %+v", c)
	}
	if fmt.Sprint(c.Subnets) != "[fd00:192:168:1::/64 192.168.1.0/24]" {
		t.Fatalf("subnets %v", c.Subnets)
	}
	want := []hostport.Mapping{
		{HostPort: 8080, Protocol: nft.ProtoTCP, ContainerPort: 80},
		{HostPort: 8080, Protocol: nft.ProtoUDP, ContainerPort: 80},
		{HostIP: netip.MustParseAddr("172.26.236.177"), HostPort: 9090, Protocol: nft.ProtoSCTP, ContainerPort: 90},
	}
	if fmt.Sprint(c.PortMappings) != fmt.Sprint(want) {
		t.Fatalf("mappings %v, want %v", c.PortMappings, want)
	}
	if len(c.ValidAttachments) != 1 || c.ValidAttachments[0].ContainerID != "c1" {
		t.Fatalf("valid attachments %v", c.ValidAttachments)
	}
	if c.PrevResult == nil || len(c.PrevResult.IPs) != 1 || c.PrevResult.IPs[0].Address.String() != "192.168.1.2/32" {
		t.Fatalf("prevResult %+v", c.PrevResult)
	}
	if c.DNS.Nameservers[0] != "10.96.0.10" {
		t.Fatalf("dns %+v", c.DNS)
	}
}

// The spec's first name for the GC list is accepted too.
func TestParseConfigLegacyAttachments(t *testing.T) {
	c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"n","subnets":["10.0.0.0/24"],"cni.dev/attachments":[{"containerID":"c9","ifname":"net1"}]}`))
	if err != nil || len(c.ValidAttachments) != 1 || c.ValidAttachments[0].IfName != "net1" {
		t.Fatalf("%+v, %v", c, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name, conf string
		code       uint
		want       string
	}{
		{"not json", `{`, types.ErrDecodingFailure, "cannot decode"},
		{"no name", `{"subnets":["10.0.0.0/24"]}`, types.ErrInvalidNetworkConfig, "name is missing"},
		{"no subnets", `{"name":"n"}`, types.ErrInvalidNetworkConfig, "subnets: at least one"},
		{"bad cidr", `{"name":"n","subnets":["10.0.0.0"]}`, types.ErrInvalidNetworkConfig, `"10.0.0.0" is not a CIDR`},
		{"host bits", `{"name":"n","subnets":["10.0.0.5/24"]}`, types.ErrInvalidNetworkConfig, "did you mean 10.0.0.0/24"},
		{"too small", `{"name":"n","subnets":["10.0.0.0/31"]}`, types.ErrInvalidNetworkConfig, "too small"},
		{"two v4", `{"name":"n","subnets":["10.0.0.0/24","10.1.0.0/24"]}`, types.ErrInvalidNetworkConfig, "one per family"},
		{"mapped v4", `{"name":"n","subnets":["::ffff:10.0.0.0/120"]}`, types.ErrInvalidNetworkConfig, "plain IPv4 or IPv6"},
		{"bad mtu", `{"name":"n","mtu":20,"subnets":["10.0.0.0/24"]}`, types.ErrInvalidNetworkConfig, "mtu 20"},
		{"v6 mtu", `{"name":"n","mtu":1000,"subnets":["fd00::/64"]}`, types.ErrInvalidNetworkConfig, "below IPv6's minimum"},
		{"long bridge", `{"name":"n","bridge":"a-very-long-bridge-name","subnets":["10.0.0.0/24"]}`, types.ErrInvalidNetworkConfig, `bridge "a-very-long-bridge-name": interface name is too long`},
		{"slash bridge", `{"name":"n","bridge":"a/b","subnets":["10.0.0.0/24"]}`, types.ErrInvalidNetworkConfig, `bridge "a/b"`},
		{"relative dataDir", `{"name":"n","dataDir":"ipam","subnets":["10.0.0.0/24"]}`, types.ErrInvalidNetworkConfig, "absolute"},
		{"bad hostPort", `{"name":"n","subnets":["10.0.0.0/24"],"runtimeConfig":{"portMappings":[{"hostPort":0,"containerPort":80}]}}`,
			types.ErrInvalidNetworkConfig, "runtimeConfig.portMappings[0]: hostPort 0"},
		{"bad containerPort", `{"name":"n","subnets":["10.0.0.0/24"],"runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":70000}]}}`,
			types.ErrInvalidNetworkConfig, "containerPort 70000"},
		{"bad protocol", `{"name":"n","subnets":["10.0.0.0/24"],"runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":1,"protocol":"icmp"}]}}`,
			types.ErrInvalidNetworkConfig, `protocol "icmp"`},
		{"bad hostIP", `{"name":"n","subnets":["10.0.0.0/24"],"runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":1,"hostIP":"x"}]}}`,
			types.ErrInvalidNetworkConfig, `hostIP "x"`},
		{"repeated hostPort", `{"name":"n","subnets":["10.0.0.0/24"],"runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":1},{"hostPort":1,"containerPort":2,"protocol":"TCP"}]}}`,
			types.ErrInvalidNetworkConfig, "portMappings[1]: hostPort 1/tcp->2 repeats runtimeConfig.portMappings[0]"},
		{"bad prevResult", `{"cniVersion":"1.1.0","name":"n","subnets":["10.0.0.0/24"],"prevResult":{"ips":[{"address":"nonsense"}]}}`,
			types.ErrDecodingFailure, "prevResult"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.conf))
			var te *types.Error
			if !errors.As(err, &te) {
				t.Fatalf("err = %v, want a *types.Error", err)
			}
			if te.Code != c.code || !strings.Contains(te.Error(), c.want) {
				t.Fatalf("err = %d %q, want code %d containing %q", te.Code, te.Error(), c.code, c.want)
			}
		})
	}
}

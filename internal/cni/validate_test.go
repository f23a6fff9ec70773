package cni

import (
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// The CNI_* variables of an attachment, hostile and boundary values, with
// the code and the whole message of the refusal ("" when accepted).
func TestValidateAttachment(t *testing.T) {
	const idChars = " (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)"
	long := strings.Repeat("a", 300)
	for _, c := range []struct {
		name    string
		a       attachment
		needNS  bool
		wantMsg string
	}{
		{"plain", attachment{"0123abc", "eth0", "/run/netns/pod"}, true, ""},
		{"dots and dashes", attachment{"a.b-c_d", "eth0.100", "/proc/42/ns/net"}, true, ""},
		{"longest id", attachment{strings.Repeat("f", MaxContainerIDLen), "eth0", "/run/netns/p"}, true, ""},
		{"longest ifname", attachment{"c", "abcdefghijklmno", "/run/netns/p"}, true, ""},
		{"unicode ifname within 15 bytes", attachment{"c", "ünï", "/run/netns/p"}, true, ""},
		{"no netns for DEL", attachment{"c", "eth0", ""}, false, ""},

		{"id empty", attachment{"", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "": required`},
		{"id ..", attachment{"..", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "..": invalid characters in containerID` + idChars},
		{"id /", attachment{"/", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "/": invalid characters in containerID` + idChars},
		{"id traversal", attachment{"../../tmp/x", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "../../tmp/x": invalid characters in containerID` + idChars},
		{"id inner slash", attachment{"a/b", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "a/b": invalid characters in containerID` + idChars},
		{"id NUL", attachment{"a\x00b", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "a\x00b": invalid characters in containerID` + idChars},
		{"id line break", attachment{"a\r\neth1", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "a\r\neth1": invalid characters in containerID` + idChars},
		{"id space", attachment{"a b", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "a b": invalid characters in containerID` + idChars},
		{"id unicode", attachment{"ünïcode", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "ünïcode": invalid characters in containerID` + idChars},
		{"id leading dot", attachment{".hidden", "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID ".hidden": invalid characters in containerID` + idChars},
		{"id 300 bytes", attachment{long, "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "` + long[:64] + `"... (300 bytes): longer than 128 bytes`},
		{"id one too long", attachment{strings.Repeat("f", MaxContainerIDLen+1), "eth0", "/run/netns/p"}, true, `invalid CNI_CONTAINERID "` + strings.Repeat("f", 64) + `"... (129 bytes): longer than 128 bytes`},

		{"ifname empty", attachment{"c", "", "/run/netns/p"}, true, `invalid CNI_IFNAME "": interface name is empty`},
		{"ifname .", attachment{"c", ".", "/run/netns/p"}, true, `invalid CNI_IFNAME ".": interface name is . or ..`},
		{"ifname ..", attachment{"c", "..", "/run/netns/p"}, true, `invalid CNI_IFNAME "..": interface name is . or ..`},
		{"ifname /", attachment{"c", "/", "/run/netns/p"}, true, `invalid CNI_IFNAME "/": interface name contains / or : or whitespace characters`},
		{"ifname traversal", attachment{"c", "../x", "/run/netns/p"}, true, `invalid CNI_IFNAME "../x": interface name contains / or : or whitespace characters`},
		{"ifname colon", attachment{"c", "eth0:1", "/run/netns/p"}, true, `invalid CNI_IFNAME "eth0:1": interface name contains / or : or whitespace characters`},
		{"ifname tab", attachment{"c", "eth\t0", "/run/netns/p"}, true, `invalid CNI_IFNAME "eth\t0": interface name contains / or : or whitespace characters`},
		{"ifname no-break space", attachment{"c", "eth\u00a00", "/run/netns/p"}, true, `invalid CNI_IFNAME "eth\u00a00": interface name contains / or : or whitespace characters`},
		{"ifname NUL", attachment{"c", "eth0\x00x", "/run/netns/p"}, true, `invalid CNI_IFNAME "eth0\x00x": interface name contains NUL`},
		{"ifname 16 bytes", attachment{"c", "abcdefghijklmnop", "/run/netns/p"}, true, `invalid CNI_IFNAME "abcdefghijklmnop": interface name is too long: interface name should be less than 16 characters`},
		{"ifname unicode over 15 bytes", attachment{"c", "ünïcödé-ünï", "/run/netns/p"}, true, `invalid CNI_IFNAME "ünïcödé-ünï": interface name is too long: interface name should be less than 16 characters`},
		{"ifname 300 bytes", attachment{"c", long, "/run/netns/p"}, true, `invalid CNI_IFNAME "` + long[:64] + `"... (300 bytes): interface name is too long: interface name should be less than 16 characters`},

		{"netns missing for ADD", attachment{"c", "eth0", ""}, true, `invalid CNI_NETNS "": required`},
		{"netns relative", attachment{"c", "eth0", "run/netns/p"}, true, `invalid CNI_NETNS "run/netns/p": not an absolute path`},
		{"netns traversal", attachment{"c", "eth0", "/run/netns/../../etc/passwd"}, true, `invalid CNI_NETNS "/run/netns/../../etc/passwd": not a canonical path (".", ".." or an empty element); want /etc/passwd`},
		{"netns NUL", attachment{"c", "eth0", "/run/netns/p\x00"}, false, `invalid CNI_NETNS "/run/netns/p\x00": contains NUL`},
		{"netns double slash", attachment{"c", "eth0", "/run//netns/p"}, false, `invalid CNI_NETNS "/run//netns/p": not a canonical path (".", ".." or an empty element); want /run/netns/p`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := validateAttachment(c.a, c.needNS)
			if c.wantMsg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || err.Code != types.ErrInvalidEnvironmentVariables || err.Msg != c.wantMsg || err.Details != "" {
				t.Fatalf("got %#v\nwant code 4 %q", err, c.wantMsg)
			}
		})
	}
}

// Configuration that becomes a path or a kernel object's name: the network
// name (the default dataDir, aliases, rule comments), the bridge, dataDir
// and GC's valid-attachments; each refusal is code 7 naming the field.
func TestParseConfigRefusesHostileNames(t *testing.T) {
	long := strings.Repeat("n", 300)
	longest := strings.Repeat("n", MaxNetworkNameLen)
	for _, c := range []struct {
		name, conf string
		want       string // the whole Error(); "" when accepted
	}{
		{"longest network name", `{"name":"` + longest + `","subnets":["10.0.0.0/24"]}`, ""},
		{"network ..", `{"name":"..","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; name "..": invalid characters found in network name (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
		{"network traversal", `{"name":"../../../tmp/x","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; name "../../../tmp/x": invalid characters found in network name (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
		{"network slash", `{"name":"a/b","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; name "a/b": invalid characters found in network name (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
		{"network NUL", `{"name":"a\u0000b","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; name "a\x00b": invalid characters found in network name (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
		{"network space", `{"name":"a b","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; name "a b": invalid characters found in network name (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
		{"network unicode", `{"name":"сеть","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; name "сеть": invalid characters found in network name (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
		{"network 300 bytes", `{"name":"` + long + `","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; name "` + long[:64] + `"... (300 bytes): longer than 103 bytes`},
		{"network one too long", `{"name":"` + longest + `n","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; name "` + longest[:64] + `"... (104 bytes): longer than 103 bytes`},
		{"bridge ..", `{"name":"n","bridge":"..","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; network "n": bridge "..": interface name is . or ..`},
		{"bridge NUL", `{"name":"n","bridge":"br\u0000x","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; network "n": bridge "br\x00x": interface name contains NUL`},
		{"dataDir traversal", `{"name":"n","dataDir":"/var/lib/cni/../../../tmp","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; network "n": dataDir "/var/lib/cni/../../../tmp": not a canonical path (".", ".." or an empty element); want /tmp`},
		{"dataDir root", `{"name":"n","dataDir":"/","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; network "n": dataDir "/": the root directory cannot hold the IPAM store`},
		{"dataDir NUL", `{"name":"n","dataDir":"/x\u0000y","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; network "n": dataDir "/x\x00y": contains NUL`},
		{"dataDir relative", `{"name":"n","dataDir":"x/y","subnets":["10.0.0.0/24"]}`,
			`invalid network configuration; network "n": dataDir "x/y": want an absolute path`},
		{"valid attachment", `{"name":"n","subnets":["10.0.0.0/24"],"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`, ""},
		{"valid-attachments id traversal", `{"name":"n","subnets":["10.0.0.0/24"],"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"},{"containerID":"../x","ifname":"eth0"}]}`,
			`invalid network configuration; network "n": cni.dev/valid-attachments[1].containerID "../x": invalid characters in containerID (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
		{"valid-attachments id 300 bytes", `{"name":"n","subnets":["10.0.0.0/24"],"cni.dev/valid-attachments":[{"containerID":"` + long + `","ifname":"eth0"}]}`,
			`invalid network configuration; network "n": cni.dev/valid-attachments[0].containerID "` + long[:64] + `"... (300 bytes): longer than 128 bytes`},
		{"valid-attachments ifname", `{"name":"n","subnets":["10.0.0.0/24"],"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"a/b"}]}`,
			`invalid network configuration; network "n": cni.dev/valid-attachments[0].ifname "a/b": interface name contains / or : or whitespace characters`},
		{"legacy attachments list", `{"name":"n","subnets":["10.0.0.0/24"],"cni.dev/attachments":[{"containerID":"c1","ifname":""}]}`,
			`invalid network configuration; network "n": cni.dev/valid-attachments[0].ifname "": interface name is empty`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.conf))
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			te, ok := err.(*types.Error)
			if !ok || te.Code != types.ErrInvalidNetworkConfig || te.Error() != c.want {
				t.Fatalf("got %v\nwant code 7 %q", err, c.want)
			}
		})
	}
}

// The limits keep the readable identity within what the kernel stores: the
// alias within IFALIASZ - 1 and the rule comment within the user data the
// nftables layer accepts (internal/nft/netlink: 256 bytes, 3 of them the
// TLV header and the NUL).
func TestIdentityLimitsFitTheKernel(t *testing.T) {
	network := strings.Repeat("n", MaxNetworkNameLen)
	id := strings.Repeat("c", MaxContainerIDLen)
	ifname := strings.Repeat("i", maxIfNameLen)
	if n := len(Alias(network, id, ifname)); n != 255 {
		t.Errorf("longest alias has %d bytes, want 255", n)
	}
	if n := len(network + " " + id + " " + ifname); n > 256-3 {
		t.Errorf("longest rule comment has %d bytes, over 253", n)
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"abc":                   `"abc"`,
		"a\nb":                  `"a\nb"`,
		"\xff":                  `"\xff"`,
		strings.Repeat("x", 64): `"` + strings.Repeat("x", 64) + `"`,
		strings.Repeat("x", 65): `"` + strings.Repeat("x", 64) + `"... (65 bytes)`,
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
}

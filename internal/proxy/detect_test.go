package proxy

import (
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/svcnet/svcnet/internal/model"
)

// TestProxierDetectLocalModes: each --detect-local-mode reaches the rules
// as kube-proxy's would write it: the ClusterIP masquerade of traffic not
// from a local pod.
func TestProxierDetectLocalModes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"ClusterCIDR", Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")},
			PodBridgeInterface: "cbr0"}, "ip saddr != 192.168.0.0/16 jump mark-for-masquerade"},
		{"BridgeInterface", Config{DetectLocalMode: LocalModeBridgeInterface, PodBridgeInterface: "cbr0",
			ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}}, `iifname != "cbr0" jump mark-for-masquerade`},
		{"InterfaceNamePrefix", Config{DetectLocalMode: LocalModeInterfaceNamePrefix, PodInterfaceNamePrefix: "cali"},
			`iifname != "cali*" jump mark-for-masquerade`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, tc.cfg, func(t *testing.T, h *harness) {
				h.store.Update(func(tx *model.Txn) {
					tx.SetService(service("web", "10.96.0.20", 80, model.ProtocolTCP))
					tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.10"))
					tx.SetSynced(true)
				})
				s := h.waitFor("web", func(s string) bool { return strings.Contains(s, "dnat to 192.168.2.10:80") })
				if !strings.Contains(s, tc.want) || strings.Count(s, "mark-for-masquerade comment \"default/web:p\"") != 2 {
					t.Fatalf("want %q (and the hairpin rule) in:\n%s", tc.want, s)
				}
			})
		})
	}
}

// TestProxierNodeCIDRWaitsForPodCIDRs: in mode NodeCIDR nothing is
// programmed until this node's Node has podCIDRs (as kube-proxy waits for
// them); the rules then follow them, and keep the last ones seen when the
// Node loses them.
func TestProxierNodeCIDRWaitsForPodCIDRs(t *testing.T) {
	run(t, Config{DetectLocalMode: LocalModeNodeCIDR, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}}, func(t *testing.T, h *harness) {
		node := func(cidrs ...string) *model.Node {
			n := &model.Node{Name: "node1"}
			for _, c := range cidrs {
				n.PodCIDRs = append(n.PodCIDRs, netip.MustParsePrefix(c))
			}
			return n
		}
		h.store.Update(func(tx *model.Txn) {
			tx.SetService(service("web", "10.96.0.20", 80, model.ProtocolTCP))
			tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.10"))
			tx.SetNode(node())
			tx.SetSynced(true)
		})
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(h.results()); n != 0 {
			t.Fatalf("synced %d times before the Node had podCIDRs", n)
		}
		h.store.Update(func(tx *model.Txn) { tx.SetNode(node("192.168.1.0/24", "fd00:192:168:1::/64")) })
		h.waitFor("node CIDR detection", func(s string) bool { return strings.Contains(s, "ip saddr != 192.168.1.0/24 jump mark-for-masquerade") })
		h.store.Update(func(tx *model.Txn) { tx.SetNode(node("192.168.7.0/24")) })
		h.waitFor("new node CIDR", func(s string) bool { return strings.Contains(s, "ip saddr != 192.168.7.0/24 jump mark-for-masquerade") })
		h.store.Update(func(tx *model.Txn) {
			tx.DeleteNode("node1")
			tx.SetService(service("web2", "10.96.0.21", 80, model.ProtocolTCP))
			tx.SetEndpointSlice(slice("web2", 80, model.ProtocolTCP, "192.168.2.11"))
		})
		s := h.waitFor("web2", func(s string) bool { return strings.Contains(s, "dnat to 192.168.2.11:80") })
		if strings.Count(s, "ip saddr != 192.168.7.0/24 jump mark-for-masquerade") != 2 {
			t.Fatalf("the last podCIDR seen is not kept after the Node went away:\n%s", s)
		}
	})
}

// TestProxierMasqueradeMark: --masquerade-bit reaches every rule that sets,
// tests or clears the mark.
func TestProxierMasqueradeMark(t *testing.T) {
	run(t, Config{MasqueradeMark: 1 << 3, MasqueradeAll: true}, func(t *testing.T, h *harness) {
		h.store.Update(func(tx *model.Txn) {
			tx.SetService(service("web", "10.96.0.20", 80, model.ProtocolTCP))
			tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.10"))
			tx.SetSynced(true)
		})
		s := h.waitFor("web", func(s string) bool { return strings.Contains(s, "dnat to 192.168.2.10:80") })
		for _, want := range []string{"meta mark set meta mark | 0x00000008", "meta mark & 0x00000008 == 0x00000000 return", "meta mark set meta mark ^ 0x00000008"} {
			if !strings.Contains(s, want) {
				t.Errorf("want %q in:\n%s", want, s)
			}
		}
		if strings.Contains(s, "0x00004000") {
			t.Errorf("the default mark 0x4000 is still used:\n%s", s)
		}
	})
}

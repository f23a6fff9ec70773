package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/servicetable"
	"golang.org/x/sys/unix"
)

// Config is the proxier's configuration (kube-proxy's flag names in comments).
type Config struct {
	// NodeName is this node's name (--hostname-override).
	NodeName string
	// DetectLocalMode says how traffic from pods is told from other traffic
	// (--detect-local-mode; "" is ClusterCIDR), with kube-proxy's meanings:
	// ClusterCIDR by source in ClusterCIDRs; NodeCIDR by source in this
	// node's spec.podCIDRs (the first sync waits for the Node to have them);
	// BridgeInterface by arrival on PodBridgeInterface; InterfaceNamePrefix
	// by arrival on an interface named PodInterfaceNamePrefix*.
	DetectLocalMode LocalMode
	// ClusterCIDRs detect pod traffic in mode ClusterCIDR (--cluster-cidr;
	// at most one per family).
	ClusterCIDRs []netip.Prefix
	// PodBridgeInterface is mode BridgeInterface's bridge
	// (--pod-bridge-interface).
	PodBridgeInterface string
	// PodInterfaceNamePrefix is mode InterfaceNamePrefix's prefix
	// (--pod-interface-name-prefix).
	PodInterfaceNamePrefix string
	// MasqueradeMark is the mark bit that asks for SNAT (--masquerade-bit B:
	// 1<<B); 0 means kube-proxy's default, bit 14 (0x4000).
	MasqueradeMark uint32
	// NodePortAddresses selects node addresses for NodePorts (--nodeport-addresses):
	// CIDRs, or the word "primary" (the node's primary IPs from its Node
	// object). Empty means "primary", as in kube-proxy's nftables mode.
	NodePortAddresses []string
	// MasqueradeAll masquerades all ClusterIP traffic (--masquerade-all).
	MasqueradeAll bool
	// EgressMasquerade masquerades pod traffic that leaves the cluster to
	// the node's address (--egress-masquerade), as ip-masq-agent does: from
	// a source in ClusterCIDRs (whatever DetectLocalMode is) to a
	// destination outside ClusterCIDRs, ServiceCIDRs, NonMasqueradeCIDRs
	// and, unless MasqueradeLinkLocal, the link-local ranges. A family
	// without a cluster CIDR masquerades nothing (Egress says which do).
	EgressMasquerade bool
	// NonMasqueradeCIDRs are destinations egress masquerade leaves alone
	// (--non-masquerade-cidrs; ip-masq-agent's nonMasqueradeCIDRs).
	NonMasqueradeCIDRs []netip.Prefix
	// MasqueradeLinkLocal masquerades egress traffic to link-local
	// destinations too (--masquerade-link-local; ip-masq-agent's
	// masqLinkLocal and masqLinkLocalIPv6).
	MasqueradeLinkLocal bool
	// ServiceCIDRs are the cluster's Service networks, which egress
	// masquerade leaves alone (--service-cluster-ip-range, where known).
	ServiceCIDRs []netip.Prefix
	// SyncPeriod bounds the time between full syncs (--sync-period, 30s).
	SyncPeriod time.Duration
	// MinSyncPeriod is the minimum time between syncs (--min-sync-period, 1s).
	MinSyncPeriod time.Duration
	// FullSyncPeriod is how often the tables are read back and compared
	// whole even when nothing hints at drift (1h, as kube-proxy's nftables
	// mode); the nftables generation check catches others' changes sooner.
	FullSyncPeriod time.Duration
	// DriftCheckPeriod is how often the nftables generation is polled for
	// changes by others (1s).
	DriftCheckPeriod time.Duration
	// Families are the IP families to program (both by default).
	Families []ipfamily.Family
}

// LocalMode is a --detect-local-mode value.
type LocalMode string

// kube-proxy's --detect-local-mode values.
const (
	LocalModeClusterCIDR         LocalMode = "ClusterCIDR"
	LocalModeNodeCIDR            LocalMode = "NodeCIDR"
	LocalModeBridgeInterface     LocalMode = "BridgeInterface"
	LocalModeInterfaceNamePrefix LocalMode = "InterfaceNamePrefix"
)

// LocalModes lists the --detect-local-mode values.
var LocalModes = []LocalMode{LocalModeClusterCIDR, LocalModeNodeCIDR, LocalModeBridgeInterface, LocalModeInterfaceNamePrefix}

// Defaults for Config fields left zero.
const (
	DefaultSyncPeriod       = 30 * time.Second
	DefaultMinSyncPeriod    = 1 * time.Second
	DefaultDriftCheckPeriod = 1 * time.Second
	DefaultFullSyncPeriod   = time.Hour
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.SyncPeriod == 0 {
		c.SyncPeriod = DefaultSyncPeriod
	}
	if c.MinSyncPeriod == 0 {
		c.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if c.FullSyncPeriod == 0 {
		c.FullSyncPeriod = DefaultFullSyncPeriod
	}
	if c.DriftCheckPeriod == 0 {
		c.DriftCheckPeriod = DefaultDriftCheckPeriod
	}
	if len(c.NodePortAddresses) == 0 {
		c.NodePortAddresses = []string{"primary"}
	}
	if c.DetectLocalMode == "" {
		c.DetectLocalMode = LocalModeClusterCIDR
	}
	if len(c.Families) == 0 {
		c.Families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	}
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.NodeName == "" {
		return fmt.Errorf("node name is required (--hostname-override)")
	}
	if c.SyncPeriod <= 0 {
		return fmt.Errorf("sync period %s: must be positive", c.SyncPeriod)
	}
	if c.MinSyncPeriod < 0 || c.MinSyncPeriod > c.SyncPeriod {
		return fmt.Errorf("min sync period %s: must be between 0 and the sync period %s", c.MinSyncPeriod, c.SyncPeriod)
	}
	seen := map[bool]bool{}
	for _, p := range c.ClusterCIDRs {
		if seen[p.Addr().Is6()] {
			return fmt.Errorf("cluster CIDRs %v: at most one per IP family", c.ClusterCIDRs)
		}
		seen[p.Addr().Is6()] = true
	}
	switch c.DetectLocalMode {
	case "", LocalModeClusterCIDR, LocalModeNodeCIDR:
	case LocalModeBridgeInterface:
		if err := validIfname("pod bridge interface (--pod-bridge-interface)", c.PodBridgeInterface); err != nil {
			return err
		}
	case LocalModeInterfaceNamePrefix:
		if err := validIfname("pod interface name prefix (--pod-interface-name-prefix)", c.PodInterfaceNamePrefix); err != nil {
			return err
		}
	default:
		return fmt.Errorf("detect-local mode %q: want one of %v", c.DetectLocalMode, LocalModes)
	}
	for _, l := range []struct {
		what  string
		cidrs []netip.Prefix
	}{{"non-masquerade CIDRs (--non-masquerade-cidrs)", c.NonMasqueradeCIDRs}, {"service CIDRs (--service-cluster-ip-range)", c.ServiceCIDRs}} {
		for _, p := range l.cidrs {
			if err := ValidCIDR(p); err != nil {
				return fmt.Errorf("%s: %w", l.what, err)
			}
		}
	}
	if c.MasqueradeMark&(c.MasqueradeMark-1) != 0 {
		return fmt.Errorf("masquerade mark %#x: must be a single bit", c.MasqueradeMark)
	}
	for _, s := range c.NodePortAddresses {
		if s == "primary" {
			if len(c.NodePortAddresses) > 1 {
				return fmt.Errorf("nodeport addresses %v: \"primary\" cannot be combined with CIDRs", c.NodePortAddresses)
			}
			continue
		}
		if _, err := netip.ParsePrefix(s); err != nil {
			return fmt.Errorf("nodeport addresses: %q is neither a CIDR nor \"primary\"", s)
		}
	}
	return nil
}

// validIfname checks an interface name (or name prefix) for an iifname
// match: required, shorter than IFNAMSIZ (16), and free of the characters
// Linux refuses in names ('/', ':', whitespace, NUL) and of '*', which nft
// reads as a wildcard.
func validIfname(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s: required by its detect-local mode", what)
	case len(name) >= unix.IFNAMSIZ:
		return fmt.Errorf("%s %q: longer than %d bytes", what, name, unix.IFNAMSIZ-1)
	case strings.ContainsAny(name, "/:* \t\n\x00"):
		return fmt.Errorf("%s %q: contains a character not allowed in interface names", what, name)
	}
	return nil
}

// ValidCIDR checks a CIDR given to select addresses: valid, without host
// bits (10.0.0.1/8 is a typo for either 10.0.0.0/8 or 10.0.0.1/32, so it is
// refused rather than guessed) and not an IPv4-mapped IPv6 prefix, which
// matches no packet (an IPv4 packet is matched by the IPv4 form).
func ValidCIDR(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("%q is not a CIDR", p)
	case p.Addr().Is4In6():
		return fmt.Errorf("%s is an IPv4-mapped IPv6 prefix: write the IPv4 CIDR", p)
	case p != p.Masked():
		return fmt.Errorf("%s has host bits set: the network is %s", p, p.Masked())
	}
	return nil
}

// Egress returns the node's egress masquerade, per Config.EgressMasquerade:
// the zero value when it is off or there is no cluster CIDR.
func (c Config) Egress() servicetable.EgressMasquerade {
	if !c.EgressMasquerade || len(c.ClusterCIDRs) == 0 {
		return servicetable.EgressMasquerade{}
	}
	return servicetable.EgressMasquerade{
		PodCIDRs:            c.ClusterCIDRs,
		ServiceCIDRs:        c.ServiceCIDRs,
		NonMasqueradeCIDRs:  c.NonMasqueradeCIDRs,
		MasqueradeLinkLocal: c.MasqueradeLinkLocal,
	}
}

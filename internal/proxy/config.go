package proxy

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/nft"
)

// Config is the proxier's configuration (kube-proxy's flag names in comments).
type Config struct {
	// NodeName is this node's name (--hostname-override).
	NodeName string
	// ClusterCIDRs detect pod traffic (--cluster-cidr; at most one per family).
	ClusterCIDRs []netip.Prefix
	// NodePortAddresses selects node addresses for NodePorts (--nodeport-addresses):
	// CIDRs, or the word "primary" (the node's primary IPs from its Node
	// object). Empty means "primary", as in kube-proxy's nftables mode.
	NodePortAddresses []string
	// MasqueradeAll masquerades all ClusterIP traffic (--masquerade-all).
	MasqueradeAll bool
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
	Families []nft.Family
}

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
	if len(c.Families) == 0 {
		c.Families = []nft.Family{nft.IPv4, nft.IPv6}
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

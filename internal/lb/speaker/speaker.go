package speaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lb/announce"
	"github.com/svcnet/svcnet/internal/lb/members"
	"github.com/svcnet/svcnet/internal/model"
)

// Defaults of Config.
const (
	DefaultRetryBase = time.Second
	maxBackoff       = 30 * time.Second
)

// Membership is what the speaker needs of internal/lb/members; *members.Members
// implements it. The speaker must be the only reader of Changed and the only
// caller of SetReady.
type Membership interface {
	SetPeers(peers map[string][]netip.Addr)
	SetReady(ready bool)
	Alive() map[string]bool
	Changed() <-chan struct{}
	Timeout() time.Duration
	Rejoins() uint64
}

var _ Membership = (*members.Members)(nil)

// Config configures a Speaker.
type Config struct {
	// NodeName is this node. Required.
	NodeName string
	// Class is our spec.loadBalancerClass; "" means plan.DefaultClass.
	Class string
	// IsDefault: LoadBalancer Services without a class are ours too.
	IsDefault bool
	// Announcer answers ARP/NDP for the IPs this node owns. Required.
	Announcer announce.Announcer
	// Members says which peers' speakers are alive; its Run must be running
	// (the caller runs it, on a socket it opens). Required.
	Members Membership
	// WarmUp is how long after the first synced snapshot nothing is announced,
	// so that peers are heard before anything is claimed; zero means
	// 3×Members.Timeout(). Negative is an error.
	WarmUp time.Duration
	// RetryBase is the first wait before retrying a failed SetOwned; each retry
	// doubles it, up to 30 s. Zero means DefaultRetryBase.
	RetryBase time.Duration
	// Logger gets a line for every IP this node gains or loses; the zero value
	// means klog.Background().
	Logger klog.Logger
}

// Speaker keeps the announcer answering exactly the LoadBalancer IPs this node
// owns. New starts nothing; Run does the work.
type Speaker struct {
	cfg Config
	log klog.Logger

	claims map[netip.Addr]*claim // the last computation (Run's goroutine only)
	alive  map[string]bool       // the alive set of the last computation (Run's goroutine only)
	// rejoins is Members.Rejoins at the last computation (Run's goroutine only).
	rejoins uint64

	mu    sync.Mutex
	owned []netip.Addr // this node's IPs by the last computation, sorted
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Speaker, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("speaker: no node name")
	case cfg.Announcer == nil:
		return nil, errors.New("speaker: no announcer")
	case cfg.Members == nil:
		return nil, errors.New("speaker: no members")
	case cfg.WarmUp < 0:
		return nil, fmt.Errorf("speaker: negative warm-up %s", cfg.WarmUp)
	}
	if cfg.WarmUp == 0 {
		cfg.WarmUp = 3 * cfg.Members.Timeout()
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	return &Speaker{cfg: cfg, log: log, claims: map[netip.Addr]*claim{}}, nil
}

// Owned returns the IPs this node owns by the last computation, sorted: what it
// asked the announcer to answer (announce.Announcer.Owned tells what it does
// answer). Empty before the warm-up ends and after Run returns.
func (s *Speaker) Owned() []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.owned)
}

// Run recomputes ownership on every change of store's snapshot and of the alive
// set, and hands this node's IPs to the announcer when they change. Every
// snapshot updates the members' peers (every Node's InternalIPs, this node's
// primary family first). Nothing is announced before the snapshot is synced
// and WarmUp has passed since the first synced one; then Run tells its peers it
// is ready (Members.SetReady), and they start counting it. A failed SetOwned is
// retried with exponential backoff until it succeeds or ownership changes. When
// ctx ends Run tells its peers it is no longer ready (they take over at once),
// withdraws every announcement and returns nil.
func (s *Speaker) Run(ctx context.Context, store *model.Store) error {
	sub := store.Subscribe()
	defer sub.Close()
	defer s.withdraw()
	warm := time.NewTimer(time.Hour)
	warm.Stop()
	defer warm.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()

	var snap *model.Snapshot
	warmStarted, warmed := false, false
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.C():
			snap, _ = sub.Next()
			s.cfg.Members.SetPeers(peersOf(snap, s.cfg.NodeName))
			if snap.Synced && !warmStarted {
				warmStarted = true
				warm.Reset(s.cfg.WarmUp)
				s.log.Info("speaker warming up", "for", s.cfg.WarmUp)
			}
		case <-s.cfg.Members.Changed():
		case <-warm.C:
			warmed = true
			s.cfg.Members.SetReady(true)
			s.log.Info("speaker ready")
		case <-retry.C:
		}
		if !warmed || !snap.Synced {
			continue
		}
		changed, err := s.sync(snap, failures > 0)
		if err == nil {
			failures = 0
			retry.Stop()
			continue
		}
		if changed {
			failures = 0
		}
		failures++
		wait := backoff(s.cfg.RetryBase, failures)
		s.log.Error(err, "announcing LoadBalancer IPs failed; retrying", "in", wait, "retry", failures)
		retry.Reset(wait)
	}
}

// sync computes ownership from snap and the alive set, logs what changed, and
// calls SetOwned when this node's set changed or force is set (a retry). It
// reports whether the set changed and SetOwned's error.
func (s *Speaker) sync(snap *model.Snapshot, force bool) (bool, error) {
	alive, rejoins := s.cfg.Members.Alive(), s.cfg.Members.Rejoins()
	returned, rejoined := s.returned(alive), s.alive != nil && rejoins != s.rejoins
	s.alive, s.rejoins = alive, rejoins
	next := claims(s.cfg, snap, alive)
	s.logChanges(s.claims, next)
	s.claims = next
	mine := ownedBy(next, s.cfg.NodeName)
	s.mu.Lock()
	changed := !slices.Equal(mine, s.owned)
	s.owned = mine
	s.mu.Unlock()
	if changed || force {
		if err := s.cfg.Announcer.SetOwned(mine); err != nil {
			return changed, fmt.Errorf("speaker: %w", err)
		}
	}
	// A peer heard again after it was dead, or a peer that did not hear this
	// node for a while (it stalled), may have taken this node's IPs meanwhile
	// (a partition; a node stopped or paused), and the neighbours' caches may
	// name it: announce them again.
	switch {
	case len(mine) == 0:
	case len(returned) > 0:
		s.log.Info("peers alive again; announcing owned LoadBalancer IPs again", "peers", returned, "ips", len(mine))
		s.cfg.Announcer.Reannounce()
	case rejoined:
		s.log.Info("this node was silent; announcing owned LoadBalancer IPs again", "ips", len(mine))
		s.cfg.Announcer.Reannounce()
	}
	return changed, nil
}

// returned lists, sorted, the peers in alive that were not alive at the last
// computation (none at the first).
func (s *Speaker) returned(alive map[string]bool) []string {
	if s.alive == nil {
		return nil
	}
	var out []string
	for name := range alive {
		if !s.alive[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// withdraw tells the peers this node owns nothing any more and stops every
// announcement, when Run ends.
func (s *Speaker) withdraw() {
	s.cfg.Members.SetReady(false)
	s.mu.Lock()
	had := len(s.owned) > 0
	s.owned = nil
	s.mu.Unlock()
	s.claims, s.alive, s.rejoins = map[netip.Addr]*claim{}, nil, 0
	if err := s.cfg.Announcer.SetOwned(nil); err != nil {
		s.log.Error(err, "withdrawing LoadBalancer IPs failed")
		return
	}
	if had {
		s.log.Info("speaker stopped; LoadBalancer IPs withdrawn")
	}
}

// logChanges logs every IP this node gains or loses (Info) and every other
// ownership move (V(2)).
func (s *Speaker) logChanges(prev, next map[netip.Addr]*claim) {
	self := s.cfg.NodeName
	for _, ip := range sortedIPs(prev, next) {
		p, n := prev[ip], next[ip]
		was, is := ownerOf(p), ownerOf(n)
		if was == is {
			continue
		}
		switch {
		case is == self:
			s.log.Info("LoadBalancer IP gained", "ip", ip, "services", keyStrings(n.services), "previousOwner", cmp.Or(was, "none"), "eligible", n.eligible)
		case was == self:
			s.log.Info("LoadBalancer IP lost", "ip", ip, "services", keyStrings(cmp.Or(n, p).services), "reason", lostReason(n))
		default:
			s.log.V(2).Info("LoadBalancer IP owner changed", "ip", ip, "services", keyStrings(cmp.Or(n, p).services), "from", cmp.Or(was, "none"), "to", cmp.Or(is, "none"))
		}
	}
}

// keyStrings renders Service keys as namespace/name for logs.
func keyStrings(keys []model.ServiceKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out
}

func lostReason(n *claim) string {
	switch {
	case n == nil:
		return "no Service announces it any more"
	case n.owner == "":
		return "no eligible node"
	default:
		return "owned by " + n.owner
	}
}

func ownerOf(c *claim) string {
	if c == nil {
		return ""
	}
	return c.owner
}

// ownedBy returns the IPs node owns, sorted.
func ownedBy(cs map[netip.Addr]*claim, node string) []netip.Addr {
	var out []netip.Addr
	for ip, c := range cs {
		if c.owner == node {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

func sortedIPs(a, b map[netip.Addr]*claim) []netip.Addr {
	out := make([]netip.Addr, 0, len(a)+len(b))
	for ip := range a {
		out = append(out, ip)
	}
	for ip := range b {
		if a[ip] == nil {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// peersOf returns every Node's InternalIPs (those that parse), each node's
// addresses of this node's primary family first, then the rest in status order.
// This node is included: members sends from its addresses.
func peersOf(snap *model.Snapshot, self string) map[string][]netip.Addr {
	primary := ipfamily.IPv4
	if n := snap.Node(self); n != nil {
		if ips := internalIPs(n); len(ips) > 0 {
			primary = ipfamily.Of(ips[0])
		}
	}
	out := map[string][]netip.Addr{}
	for _, n := range snap.Nodes() {
		ips := internalIPs(n)
		if len(ips) == 0 {
			continue
		}
		slices.SortStableFunc(ips, func(a, b netip.Addr) int {
			return cmp.Compare(rank(ipfamily.Of(a), primary), rank(ipfamily.Of(b), primary))
		})
		out[n.Name] = ips
	}
	return out
}

func rank(f, primary ipfamily.Family) int {
	if f == primary {
		return 0
	}
	return 1
}

func internalIPs(n *model.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Addresses {
		if a.Type != "InternalIP" {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// backoff is base doubled for every failure after the first, at most maxBackoff.
func backoff(base time.Duration, failures int) time.Duration {
	d := base
	for range min(failures-1, 16) {
		d *= 2
	}
	return min(d, maxBackoff)
}

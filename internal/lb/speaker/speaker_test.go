package speaker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/lb/announce"
	"github.com/svcnet/svcnet/internal/model"
)

// fakeMembers is a Membership whose alive set the test sets.
type fakeMembers struct {
	mu      sync.Mutex
	alive   map[string]bool
	peers   map[string][]netip.Addr
	ready   bool
	rejoins uint64
	changed chan struct{}
}

func newFakeMembers(alive ...string) *fakeMembers {
	f := &fakeMembers{alive: map[string]bool{}, changed: make(chan struct{}, 1)}
	for _, n := range alive {
		f.alive[n] = true
	}
	return f
}

func (f *fakeMembers) SetPeers(p map[string][]netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = maps.Clone(p)
}

func (f *fakeMembers) SetReady(ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready = ready
}

func (f *fakeMembers) isReady() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func (f *fakeMembers) Alive() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.alive)
}

func (f *fakeMembers) Changed() <-chan struct{} { return f.changed }

func (f *fakeMembers) Rejoins() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rejoins
}

// rejoin counts a rejoin of this node, as Members does after it was silent.
func (f *fakeMembers) rejoin() {
	f.mu.Lock()
	f.rejoins++
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}
func (f *fakeMembers) Timeout() time.Duration { return 400 * time.Millisecond }

func (f *fakeMembers) set(name string, alive bool) {
	f.mu.Lock()
	f.alive[name] = alive
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeMembers) peersSet() map[string][]netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.peers)
}

// findIP returns the first pool IP whose owners, all nodes alive and then with
// node `dies` dead, are want and then.
func findIP(t *testing.T, want, dies, then string) string {
	t.Helper()
	for _, ip := range poolIPs() {
		var rest []string
		for _, n := range []string{"node1", "node2", "node3"} {
			if n != dies {
				rest = append(rest, n)
			}
		}
		if refOwner(ip, "node1", "node2", "node3") == want && refOwner(ip, rest...) == then {
			return ip
		}
	}
	t.Fatalf("no pool IP owned by %s, then by %s when %s dies", want, then, dies)
	return ""
}

// speakerRig runs node1's speaker over a store, fake members and a fake announcer.
type speakerRig struct {
	store *model.Store
	mem   *fakeMembers
	ann   *announce.Fake
	log   *logSink
	sp    *Speaker
	stop  func()
}

func startSpeaker(t *testing.T, store *model.Store, mem *fakeMembers, mod func(*Config)) *speakerRig {
	t.Helper()
	r := &speakerRig{store: store, mem: mem, ann: &announce.Fake{}, log: &logSink{}}
	cfg := Config{NodeName: "node1", IsDefault: true, Announcer: r.ann, Members: mem, WarmUp: time.Millisecond, RetryBase: 20 * time.Millisecond, Logger: r.log.logger()}
	if mod != nil {
		mod(&cfg)
	}
	sp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.sp = sp
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sp.Run(ctx, store) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("Run did not return within 5s of cancel")
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// waitOwned waits until both the speaker and the announcer hold exactly ips.
func (r *speakerRig) waitOwned(t *testing.T, ips ...string) {
	t.Helper()
	want := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		want = append(want, netip.MustParseAddr(ip))
	}
	slices.SortFunc(want, netip.Addr.Compare)
	eventually(t, 3*time.Second, fmt.Sprintf("node1 owns %v", ips), func() bool {
		return slices.Equal(r.sp.Owned(), want) && slices.Equal(r.ann.Owned(), want)
	})
}

func syncedStore(fn func(tx *model.Txn)) *model.Store {
	st := model.NewStore()
	st.Update(func(tx *model.Txn) {
		fn(tx)
		tx.SetSynced(true)
	})
	return st
}

// TestSpeakerFailover: node1 takes an IP over when its owner stops being alive
// and gives it back when the owner returns, logging both with the Service; the
// owner's return, and node1's own rejoin after a stall, make node1 announce
// the IPs it kept again.
func TestSpeakerFailover(t *testing.T) {
	x := findIP(t, "node2", "node2", "node1") // node2's, node1's when node2 dies
	y := findIP(t, "node1", "node3", "node1") // node1's throughout
	store := syncedStore(func(tx *model.Txn) {
		threeNodes(tx)
		tx.SetService(lbSvc("web", model.TrafficPolicyCluster, x))
		tx.SetService(lbSvc("api", model.TrafficPolicyCluster, y))
	})
	mem := newFakeMembers("node1", "node2", "node3")
	r := startSpeaker(t, store, mem, nil)
	r.waitOwned(t, y)

	mem.set("node2", false)
	r.waitOwned(t, x, y)
	if r.log.count(`"LoadBalancer IP gained"`, `"ip"="`+x+`"`, `"default/web"`, `"previousOwner"="node2"`) != 1 {
		t.Errorf("gain of %s not logged once: %q", x, r.log.Lines())
	}
	mem.set("node2", true)
	r.waitOwned(t, y)
	if r.log.count(`"LoadBalancer IP lost"`, `"ip"="`+x+`"`, `"default/web"`, `"reason"="owned by node2"`) != 1 {
		t.Errorf("loss of %s not logged once: %q", x, r.log.Lines())
	}
	// Each gain once, then y again when node2 came back: node2 may have
	// claimed it while node1 was not heard (a partition, a stall).
	want := []netip.Addr{netip.MustParseAddr(y), netip.MustParseAddr(x), netip.MustParseAddr(y)}
	if got := r.ann.Announced(); !slices.Equal(got, want) {
		t.Errorf("announcements %v, want %v", got, want)
	}
	if r.log.count(`"peers alive again; announcing owned LoadBalancer IPs again"`, `"peers"=["node2"]`) != 1 {
		t.Errorf("the announcements again not logged once: %q", r.log.Lines())
	}

	// This node was silent (stalled): it announces its IPs again, once.
	mem.rejoin()
	want = append(want, netip.MustParseAddr(y))
	eventually(t, 3*time.Second, "y announced again after a rejoin", func() bool { return slices.Equal(r.ann.Announced(), want) })
	if r.log.count(`"this node was silent; announcing owned LoadBalancer IPs again"`) != 1 {
		t.Errorf("the rejoin's announcements not logged once: %q", r.log.Lines())
	}

	r.stop()
	if got := r.ann.Owned(); len(got) != 0 {
		t.Errorf("after Run returned the announcer still answers %v", got)
	}
	if got := r.sp.Owned(); len(got) != 0 {
		t.Errorf("after Run returned Owned = %v", got)
	}
}

// TestSpeakerLocalEndpoints: with externalTrafficPolicy Local the IP follows the
// ready endpoints.
func TestSpeakerLocalEndpoints(t *testing.T) {
	const z = "172.26.236.190"
	y := findIP(t, "node1", "node3", "node1") // a Cluster IP node1 owns: shows a sync happened
	store := syncedStore(func(tx *model.Txn) {
		threeNodes(tx)
		tx.SetService(lbSvc("local", model.TrafficPolicyLocal, z))
		tx.SetService(lbSvc("api", model.TrafficPolicyCluster, y))
		tx.SetEndpointSlice(slice("local", ep{"node2", "192.168.2.7", true}))
	})
	r := startSpeaker(t, store, newFakeMembers("node1", "node2", "node3"), nil)
	r.waitOwned(t, y)

	store.Update(func(tx *model.Txn) { tx.SetEndpointSlice(slice("local", ep{"node1", "192.168.1.7", true})) })
	r.waitOwned(t, y, z)
	store.Update(func(tx *model.Txn) {
		tx.SetEndpointSlice(slice("local", ep{"node1", "192.168.1.7", false}, ep{"node3", "192.168.3.7", true}))
	})
	r.waitOwned(t, y)
	if r.log.count(`"LoadBalancer IP lost"`, `"ip"="`+z+`"`, `"reason"="owned by node3"`) != 1 {
		t.Errorf("loss of %s to node3 not logged: %q", z, r.log.Lines())
	}
	store.Update(func(tx *model.Txn) { tx.DeleteService(model.ServiceKey{Namespace: "default", Name: "api"}) })
	r.waitOwned(t)
	if r.log.count(`"LoadBalancer IP lost"`, `"ip"="`+y+`"`, `"reason"="no Service announces it any more"`) != 1 {
		t.Errorf("loss of %s on delete not logged: %q", y, r.log.Lines())
	}
}

// TestSpeakerWarmUp: nothing is announced before the snapshot is synced and
// WarmUp has passed since; peers are handed to members before that. It runs
// in a synctest bubble: the sleeps that show nothing was announced yet take
// no real time, and the times measured are exact.
func TestSpeakerWarmUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const warmUp = 300 * time.Millisecond
		y := findIP(t, "node1", "node3", "node1")
		store := model.NewStore()
		store.Update(func(tx *model.Txn) {
			threeNodes(tx)
			tx.SetService(lbSvc("api", model.TrafficPolicyCluster, y))
		})
		mem := newFakeMembers("node1", "node2", "node3")
		r := startSpeaker(t, store, mem, func(c *Config) { c.WarmUp = warmUp })
		eventually(t, time.Second, "peers set from the unsynced snapshot", func() bool { return len(mem.peersSet()) == 3 })
		wantPeers := map[string][]netip.Addr{}
		for i := 1; i <= 3; i++ {
			wantPeers[fmt.Sprintf("node%d", i)] = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("172.26.236.%d", 176+i)), netip.MustParseAddr(fmt.Sprintf("fd00:26:236::%d", 176+i))}
		}
		if diff := cmp.Diff(wantPeers, mem.peersSet(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("peers (-want +got):\n%s", diff)
		}
		time.Sleep(50 * time.Millisecond)
		if got := r.ann.Owned(); len(got) != 0 || mem.isReady() {
			t.Fatalf("announced %v (ready %v) before the snapshot was synced", got, mem.isReady())
		}

		synced := time.Now()
		store.Update(func(tx *model.Txn) { tx.SetSynced(true) })
		mem.set("node3", false) // a members change during warm-up announces nothing either
		for range 3 {
			time.Sleep(warmUp / 6)
			owned, ready := r.ann.Owned(), mem.isReady()
			if since := time.Since(synced); (len(owned) != 0 || ready) && since < warmUp {
				t.Fatalf("announced %v (ready %v) %s after sync, within the warm-up of %s", owned, ready, since, warmUp)
			}
		}
		r.waitOwned(t, y)
		if since := time.Since(synced); since < warmUp {
			t.Errorf("owned %s after sync, want at least the warm-up %s", since, warmUp)
		}
		if !mem.isReady() {
			t.Error("members not told the speaker is ready after the warm-up")
		}
		r.stop()
		if mem.isReady() {
			t.Error("members still ready after Run returned")
		}
	})
}

// TestSpeakerRetry: an IP the announcer refuses is retried until it is accepted.
func TestSpeakerRetry(t *testing.T) {
	y := findIP(t, "node1", "node3", "node1")
	store := syncedStore(func(tx *model.Txn) {
		threeNodes(tx)
		tx.SetService(lbSvc("api", model.TrafficPolicyCluster, y))
	})
	mem := newFakeMembers("node1", "node2", "node3")
	ann := &announce.Fake{}
	ann.Refuse(netip.MustParseAddr(y), errors.New("multicast join failed"))
	r := startSpeaker(t, store, mem, func(c *Config) { c.Announcer = ann })
	r.ann = ann
	eventually(t, 3*time.Second, "two failed attempts logged", func() bool {
		return r.log.count(`"announcing LoadBalancer IPs failed; retrying"`, "multicast join failed") >= 2
	})
	if got := ann.Owned(); len(got) != 0 {
		t.Fatalf("refused IP answered: %v", got)
	}
	ann.Refuse(netip.MustParseAddr(y), nil)
	r.waitOwned(t, y)
}

func TestNewConfig(t *testing.T) {
	mem, ann := newFakeMembers(), &announce.Fake{}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Announcer: ann, Members: mem}, "no node name"},
		{Config{NodeName: "n", Members: mem}, "no announcer"},
		{Config{NodeName: "n", Announcer: ann}, "no members"},
		{Config{NodeName: "n", Announcer: ann, Members: mem, WarmUp: -time.Second}, "negative warm-up"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	s, err := New(Config{NodeName: "n", Announcer: ann, Members: mem})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.WarmUp != 1200*time.Millisecond || s.cfg.RetryBase != time.Second {
		t.Errorf("defaults: warm-up %s retry %s, want 3×Timeout and 1s", s.cfg.WarmUp, s.cfg.RetryBase)
	}
}

// TestPeersOf: addresses of this node's primary family come first for every
// node; nodes without an InternalIP are left out.
func TestPeersOf(t *testing.T) {
	v6first := labNode(1, true)
	v6first.Addresses = []model.NodeAddress{{Type: "InternalIP", Address: "fd00:26:236::177"}, {Type: "InternalIP", Address: "172.26.236.177"}}
	noIP := &model.Node{Name: "node9", Addresses: []model.NodeAddress{{Type: "ExternalIP", Address: "203.0.113.9"}}}
	snap := snapshot(func(tx *model.Txn) {
		tx.SetNode(v6first)
		tx.SetNode(labNode(2, false))
		tx.SetNode(noIP)
	})
	got := peersOf(snap, "node1")
	want := map[string][]netip.Addr{
		"node1": {netip.MustParseAddr("fd00:26:236::177"), netip.MustParseAddr("172.26.236.177")},
		"node2": {netip.MustParseAddr("fd00:26:236::178"), netip.MustParseAddr("172.26.236.178")},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("peersOf (-want +got):\n%s", diff)
	}
}

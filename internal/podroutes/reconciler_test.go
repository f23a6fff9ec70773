package podroutes

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/svcnet/svcnet/internal/model"

	"github.com/svcnet/svcnet/internal/logtest"
)

// logSink collects log lines for assertions.
type logSink struct{ logtest.Sink }

func (l *logSink) logger() logr.Logger { return l.Logger(0) }

func (l *logSink) count(substrs ...string) int { return l.Count(substrs...) }

func localNode1() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("172.26.236.177/24"), netip.MustParsePrefix("fd00:26:236::177/64"), netip.MustParsePrefix("192.168.1.1/24")}
}

func labNodes() []*model.Node {
	return []*model.Node{
		node("node1", []string{"172.26.236.177", "fd00:26:236::177"}, "192.168.1.0/24", "fd00:192:168:1::/64"),
		node("node2", []string{"172.26.236.178", "fd00:26:236::178"}, "192.168.2.0/24", "fd00:192:168:2::/64"),
		node("node3", []string{"172.26.236.179", "fd00:26:236::179"}, "192.168.3.0/24", "fd00:192:168:3::/64"),
	}
}

func fr(dst, via string, proto int) FakeRoute {
	return FakeRoute{Dst: netip.MustParsePrefix(dst), Via: netip.MustParseAddr(via), Protocol: proto}
}

func newTestReconciler(t *testing.T, k Kernel, log *logSink) *Reconciler {
	t.Helper()
	r, err := New(Config{NodeName: "node1", Kernel: k, Logger: log.logger(), RetryBase: 10 * time.Millisecond, ResyncPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func checkTable(t *testing.T, f *Fake, want ...FakeRoute) {
	t.Helper()
	if got := f.Table(); !slices.Equal(got, want) {
		t.Errorf("table:\n got %v\nwant %v", got, want)
	}
}

func TestSyncAddChangeDelete(t *testing.T) {
	f := NewFake(localNode1()...)
	var log logSink
	r := newTestReconciler(t, f, &log)
	ctx := context.Background()
	nodes := labNodes()
	if err := r.Sync(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	checkTable(t, f,
		fr("192.168.2.0/24", "172.26.236.178", Protocol),
		fr("192.168.3.0/24", "172.26.236.179", Protocol),
		fr("fd00:192:168:2::/64", "fd00:26:236::178", Protocol),
		fr("fd00:192:168:3::/64", "fd00:26:236::179", Protocol))
	if log.count("pod route skipped", `"node1"`, "own pod CIDRs") != 1 {
		t.Errorf("own node not reported once: %q", log.Lines())
	}

	// node3 changes address, node2 is deleted.
	nodes = []*model.Node{nodes[0], node("node3", []string{"172.26.236.190", "fd00:26:236::179"}, "192.168.3.0/24", "fd00:192:168:3::/64")}
	if err := r.Sync(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	checkTable(t, f,
		fr("192.168.3.0/24", "172.26.236.190", Protocol),
		fr("fd00:192:168:3::/64", "fd00:26:236::179", Protocol))
	if log.count("pod route replaced", "192.168.3.0/24") != 1 || log.count("pod route deleted", "192.168.2.0/24") != 1 {
		t.Errorf("changes not logged: %q", log.Lines())
	}
	// A repeated sync of the same state logs nothing new.
	before := len(log.Lines())
	if err := r.Sync(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	if len(log.Lines()) != before {
		t.Errorf("idle sync logged %q", log.Lines()[before:])
	}
}

// A restart finds routes of svcnet's protocol and reconciles them: wanted ones
// stay untouched, moved ones are replaced, stale ones deleted. Routes of other
// protocols are never changed, even at a destination svcnet wants.
func TestSyncAdoptsAndNeverTouchesForeign(t *testing.T) {
	f := NewFake(localNode1()...)
	f.Put(fr("192.168.2.0/24", "172.26.236.178", Protocol)) // still wanted
	f.Put(fr("192.168.3.0/24", "172.26.236.150", Protocol)) // node3 moved
	f.Put(fr("192.168.9.0/24", "172.26.236.189", Protocol)) // node9 is gone
	f.Put(fr("10.99.0.0/24", "172.26.236.1", 4))            // static, elsewhere
	f.Put(fr("192.168.4.0/24", "172.26.236.1", 4))          // static, at node4's CIDR
	f.Put(fr("fd00:192:168:2::/64", "fd00:26:236::1", 12))  // bird's, at node2's v6 CIDR
	var ops []string
	f.FailOn = func(op string, r Route) error { ops = append(ops, op+" "+r.Dst.String()); return nil }
	var log logSink
	r := newTestReconciler(t, f, &log)
	nodes := append(labNodes(), node("node4", []string{"172.26.236.180"}, "192.168.4.0/24"))
	if err := r.Sync(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	checkTable(t, f,
		fr("10.99.0.0/24", "172.26.236.1", 4),
		fr("192.168.2.0/24", "172.26.236.178", Protocol),
		fr("192.168.3.0/24", "172.26.236.179", Protocol),
		fr("192.168.4.0/24", "172.26.236.1", 4),
		fr("fd00:192:168:2::/64", "fd00:26:236::1", 12),
		fr("fd00:192:168:3::/64", "fd00:26:236::179", Protocol))
	wantOps := []string{"delete 192.168.9.0/24", "replace 192.168.3.0/24", "add 192.168.4.0/24", "add fd00:192:168:2::/64", "add fd00:192:168:3::/64"}
	if !slices.Equal(ops, wantOps) {
		t.Errorf("kernel calls %q, want %q", ops, wantOps)
	}
	if log.count("pod route skipped", `"node4"`, "not svcnet's") != 1 || log.count("pod route skipped", `"node2"`, "not svcnet's", "fd00:192:168:2::/64") != 1 {
		t.Errorf("conflicts not reported: %q", log.Lines())
	}
	// Cleanup removes exactly svcnet's routes.
	n, err := Cleanup(context.Background(), f)
	if err != nil || n != 3 {
		t.Fatalf("Cleanup = %d, %v; want 3", n, err)
	}
	checkTable(t, f,
		fr("10.99.0.0/24", "172.26.236.1", 4),
		fr("192.168.4.0/24", "172.26.236.1", 4),
		fr("fd00:192:168:2::/64", "fd00:26:236::1", 12))
}

// A failing route does not stop the others; the error is returned and a
// later sync completes the table.
func TestSyncKernelErrorIsolated(t *testing.T) {
	f := NewFake(localNode1()...)
	boom := errors.New("boom")
	f.FailOn = func(op string, r Route) error {
		if r.Dst == netip.MustParsePrefix("192.168.2.0/24") {
			return boom
		}
		return nil
	}
	var log logSink
	r := newTestReconciler(t, f, &log)
	err := r.Sync(context.Background(), labNodes())
	if !errors.Is(err, boom) {
		t.Fatalf("Sync error %v, want boom", err)
	}
	if got := len(f.Table()); got != 3 {
		t.Errorf("%d routes after a partial failure, want 3: %v", got, f.Table())
	}
	f.FailOn = nil
	if err := r.Sync(context.Background(), labNodes()); err != nil {
		t.Fatal(err)
	}
	if got := len(f.Table()); got != 4 {
		t.Errorf("%d routes after the retry, want 4", got)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	if _, err := New(Config{Kernel: NewFake()}); err == nil {
		t.Error("New without a node name succeeded")
	}
	if _, err := New(Config{NodeName: "n"}); err == nil {
		t.Error("New without a kernel succeeded")
	}
}

// eventually polls cond every 10ms for at most 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// Run waits for the source to be synced (an unsynced, empty model must not
// delete routes), follows the store, retries a failure with backoff without
// any new change, and returns nil when ctx ends.
func TestRunFollowsStore(t *testing.T) {
	f := NewFake(localNode1()...)
	f.Put(fr("192.168.2.0/24", "172.26.236.178", Protocol)) // left by a previous run
	var mu sync.Mutex
	failAdds := 2
	f.FailOn = func(op string, r Route) error {
		mu.Lock()
		defer mu.Unlock()
		if op == "add" && failAdds > 0 {
			failAdds--
			return errors.New("transient")
		}
		return nil
	}
	var log logSink
	r := newTestReconciler(t, f, &log)
	store := model.NewStore()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, store) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not stop")
		}
	}()

	// Unsynced: nodes arrive, nothing is done yet, the old route stays.
	store.Update(func(tx *model.Txn) {
		for _, n := range labNodes()[:1] {
			tx.SetNode(n)
		}
	})
	time.Sleep(100 * time.Millisecond)
	checkTable(t, f, fr("192.168.2.0/24", "172.26.236.178", Protocol))

	// Synced: the first two adds fail, the retries complete the table.
	store.Update(func(tx *model.Txn) {
		for _, n := range labNodes() {
			tx.SetNode(n)
		}
		tx.SetSynced(true)
	})
	eventually(t, "all four routes", func() bool { return len(f.Table()) == 4 })
	if log.count("retrying") == 0 {
		t.Errorf("no retry logged: %q", log.Lines())
	}
	store.Update(func(tx *model.Txn) { tx.DeleteNode("node3") })
	eventually(t, "node3's routes to go", func() bool {
		l, _ := f.List()
		return len(l) == 2
	})
	if l, _ := f.List(); l[0].Dst != netip.MustParsePrefix("192.168.2.0/24") || l[1].Dst != netip.MustParsePrefix("fd00:192:168:2::/64") {
		t.Errorf("after deleting node3: %v", l)
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 30 * time.Second}, {100, 30 * time.Second}} {
		if got := backoff(time.Second, tc.failures); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.failures, got, tc.want)
		}
	}
}

// Retries after one change are bounded: MaxRetries attempts with backoff, then
// Run waits for the next change, which starts a new budget.
func TestRunRetriesBounded(t *testing.T) {
	f := NewFake(localNode1()...)
	f.FailOn = func(string, Route) error { return errors.New("permanent") }
	var log logSink
	r, err := New(Config{NodeName: "node1", Kernel: f, Logger: log.logger(), RetryBase: 5 * time.Millisecond, MaxRetries: 2, ResyncPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	store := model.NewStore()
	store.Update(func(tx *model.Txn) {
		for _, n := range labNodes() {
			tx.SetNode(n)
		}
		tx.SetSynced(true)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, store) }()
	eventually(t, "giving up", func() bool { return log.count("waiting for the next change") == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := log.count("retrying"); n != 2 {
		t.Errorf("%d retries logged, want 2", n)
	}
	store.Update(func(tx *model.Txn) { tx.DeleteNode("node3") })
	eventually(t, "giving up again", func() bool { return log.count("waiting for the next change") == 2 })
	if n := log.count("retrying"); n != 4 {
		t.Errorf("%d retries logged after a new change, want 4", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Run did not stop")
	}
}

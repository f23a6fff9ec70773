package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"k8s.io/apimachinery/pkg/runtime"
)

func service(name, cip string, port int32, proto model.Protocol) *model.Service {
	return &model.Service{
		Namespace: "default", Name: name, Type: model.ServiceTypeClusterIP,
		ClusterIPs:            []netip.Addr{netip.MustParseAddr(cip)},
		IPFamilies:            []ipfamily.Family{ipfamily.IPv4},
		Ports:                 []model.ServicePort{{Name: "p", Protocol: proto, Port: port, TargetPort: port}},
		InternalTrafficPolicy: model.TrafficPolicyCluster,
	}
}

func slice(svc string, port int32, proto model.Protocol, addrs ...string) *model.EndpointSlice {
	sl := &model.EndpointSlice{Namespace: "default", Name: svc + "-1", Service: svc, AddressType: ipfamily.IPv4,
		Ports: []model.EndpointPort{{Name: "p", Protocol: proto, Port: port}}}
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, model.Endpoint{Addresses: []netip.Addr{netip.MustParseAddr(a)}, Ready: true, Serving: true, NodeName: "node2"})
	}
	return sl
}

// harness runs a Proxier over a fake kernel and records its syncs.
type harness struct {
	t      *testing.T
	store  *model.Store
	kernel *nft.Fake
	mu     sync.Mutex
	syncs  []SyncResult
	// befores records BeforeSync's argument, one per sync attempt.
	befores []bool
	cancel  context.CancelFunc
	done    chan error
	events  eventLog
}

// eventLog is a record.EventRecorder that keeps each event as "KIND
// NAMESPACE/NAME UID TYPE REASON: MESSAGE".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Event(obj runtime.Object, typ, reason, msg string) {
	ref := obj.(*corev1.ObjectReference)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s/%s %s %s %s: %s", ref.Kind, ref.Namespace, ref.Name, ref.UID, typ, reason, msg))
}

func (l *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	l.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	l.Eventf(obj, typ, reason, format, args...)
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// run runs body in a synctest bubble against a started proxier: the
// proxier's timers run on the bubble's fake clock, so waiting for a sync
// takes no real time, and synctest.Wait shows that nothing more happens.
func run(t *testing.T, cfg Config, body func(t *testing.T, h *harness), prepare ...func(k *nft.Fake)) {
	synctest.Test(t, func(t *testing.T) { body(t, start(t, cfg, prepare...)) })
}

// start starts a proxier on a fake kernel, which prepare may set up first;
// call it in a synctest bubble.
func start(t *testing.T, cfg Config, prepare ...func(k *nft.Fake)) *harness {
	t.Helper()
	h := &harness{t: t, store: model.NewStore(), kernel: nft.NewFake(), done: make(chan error, 1)}
	for _, p := range prepare {
		p(h.kernel)
	}
	cfg.NodeName = "node1"
	cfg.Families = []ipfamily.Family{ipfamily.IPv4}
	if cfg.MinSyncPeriod == 0 {
		cfg.MinSyncPeriod = time.Millisecond
	}
	cfg.DriftCheckPeriod = 20 * time.Millisecond
	p, err := New(cfg, Deps{
		Store: h.store, DataPlane: nftables.New(h.kernel, ipfamily.IPv4),
		InterfaceAddrs: func() ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("172.26.236.177")}, nil
		},
		BeforeSync: func(full bool) { h.mu.Lock(); h.befores = append(h.befores, full); h.mu.Unlock() },
		OnSync:     func(r SyncResult) { h.mu.Lock(); h.syncs = append(h.syncs, r); h.mu.Unlock() },
		Events:     &h.events,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(5 * time.Second):
			t.Error("proxier did not stop")
		}
	})
	return h
}

func (h *harness) results() []SyncResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]SyncResult(nil), h.syncs...)
}

// rendered returns the IPv4 svcnet tables of the fake kernel, rendered in
// name order; false when there are none.
func (h *harness) rendered() (string, bool) {
	tables, err := nft.ReadTables(context.Background(), h.kernel, ipfamily.IPv4, nftables.IsTable)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	for _, t := range tables {
		b.WriteString(t.Render())
	}
	return b.String(), b.Len() > 0
}

// waitFor polls the kernel's rendering until cond holds (bounded).
func (h *harness) waitFor(what string, cond func(rendered string) bool) string {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if r, ok := h.rendered(); ok {
			last = r
			if cond(last) {
				return last
			}
		}
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
	}
	h.t.Fatalf("timed out waiting for %s; kernel table:\n%s", what, last)
	return ""
}

func TestProxierWaitsForSyncThenFollowsChanges(t *testing.T) {
	run(t, Config{}, func(t *testing.T, h *harness) {
		h.store.Update(func(tx *model.Txn) {
			tx.SetService(service("web", "10.96.0.20", 80, model.ProtocolTCP))
			tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.10"))
		})
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(h.results()); n != 0 {
			t.Fatalf("synced %d times before the source was synced", n)
		}
		h.store.Update(func(tx *model.Txn) { tx.SetSynced(true) })
		h.waitFor("web", func(s string) bool { return strings.Contains(s, "dnat to 192.168.2.10:80") })
		if r := h.results()[0]; !r.Full || r.Err != nil {
			t.Fatalf("first sync: %+v", r)
		}
		// Scale: a new endpoint joins, through a partial sync.
		h.store.Update(func(tx *model.Txn) {
			tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.10", "192.168.3.10"))
		})
		h.waitFor("second endpoint", func(s string) bool { return strings.Contains(s, "dnat to 192.168.3.10:80") })
		rs := h.results()
		if last := rs[len(rs)-1]; last.Full {
			t.Fatalf("endpoint change caused a full sync: %+v", last)
		}
		// Delete: the Service's objects leave the table.
		h.store.Update(func(tx *model.Txn) { tx.DeleteService(model.ServiceKey{Namespace: "default", Name: "web"}) })
		h.waitFor("web gone", func(s string) bool { return !strings.Contains(s, "default/web") })
		// BeforeSync announced every sync, and whether it would be full.
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.befores) < len(h.syncs) || len(h.befores) > len(h.syncs)+1 {
			t.Fatalf("BeforeSync called %d times for %d syncs", len(h.befores), len(h.syncs))
		}
		for i, r := range h.syncs {
			if h.befores[i] != r.Full {
				t.Errorf("sync %d: BeforeSync(%v), sync full=%v", i, h.befores[i], r.Full)
			}
		}
	})
}

func TestProxierRepairsDriftFromGeneration(t *testing.T) {
	run(t, Config{}, func(t *testing.T, h *harness) {
		h.store.Update(func(tx *model.Txn) {
			tx.SetService(service("dns", "10.96.0.10", 53, model.ProtocolUDP))
			tx.SetEndpointSlice(slice("dns", 53, model.ProtocolUDP, "192.168.2.53"))
			tx.SetSynced(true)
		})
		want := h.waitFor("dns", func(s string) bool { return strings.Contains(s, "dnat to 192.168.2.53:53") })
		h.kernel.Mutate(ipfamily.IPv4, nftables.TableName, func(*nft.Table) *nft.Table { return nil })
		h.kernel.Mutate(ipfamily.IPv4, nftables.ShardTable(0), func(*nft.Table) *nft.Table { return nil })
		got := h.waitFor("table restored", func(s string) bool { return s == want })
		if got != want {
			t.Fatal("not restored")
		}
		found := false
		for _, r := range h.results() {
			found = found || r.Drift || (r.Full && r.TotalOps() > 0)
		}
		if !found {
			t.Fatal("no full sync repaired the drift")
		}
	})
}

func TestProxierRetriesFailedSyncAsFull(t *testing.T) {
	var fail sync.Once
	// The first sync's transaction fails (not the start's feature probe,
	// which commits scratch tables of its own).
	failFirstSync := func(k *nft.Fake) {
		k.FailApply = func(tx *nft.Tx) error {
			if !nftables.IsTable(tx.Table) {
				return nil
			}
			err := errors.New("injected")
			ok := false
			fail.Do(func() { ok = true })
			if ok {
				return err
			}
			return nil
		}
	}
	run(t, Config{}, func(t *testing.T, h *harness) {
		h.store.Update(func(tx *model.Txn) {
			tx.SetService(service("web", "10.96.0.20", 80, model.ProtocolTCP))
			tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.10"))
			tx.SetSynced(true)
		})
		h.waitFor("web after a failed first sync", func(s string) bool { return strings.Contains(s, "dnat to 192.168.2.10:80") })
		rs := h.results()
		if len(rs) < 2 || rs[0].Err == nil || rs[1].Err != nil || !rs[1].Full {
			t.Fatalf("want a failed sync then a full one, got %+v", rs)
		}
	}, failFirstSync)
}

func TestProxierSkipsBadServiceKeepsOthers(t *testing.T) {
	run(t, Config{}, func(t *testing.T, h *harness) {
		bad := service("bad", "10.96.0.30", 80, model.ProtocolTCP)
		bad.UID = "uid-bad"
		// An externalIP equal to another Service's ClusterIP: the node cannot
		// express it (CVE-2020-8554), so it is skipped whole.
		bad.ExternalIPs = []netip.Addr{netip.MustParseAddr("10.96.0.20")}
		h.store.Update(func(tx *model.Txn) {
			tx.SetService(service("web", "10.96.0.20", 80, model.ProtocolTCP))
			tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.10"))
			tx.SetService(bad)
			tx.SetEndpointSlice(slice("bad", 80, model.ProtocolTCP, "192.168.2.30"))
			tx.SetSynced(true)
		})
		s := h.waitFor("web", func(s string) bool { return strings.Contains(s, "dnat to 192.168.2.10:80") })
		if strings.Contains(s, "default/bad") {
			t.Fatalf("bad Service programmed:\n%s", s)
		}
		rs := h.results()
		if rs[len(rs)-1].Skipped != 1 {
			t.Fatalf("skipped = %d, want 1", rs[len(rs)-1].Skipped)
		}
		// One Warning event on the Service, however many syncs skip it.
		h.store.Update(func(tx *model.Txn) { tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.11")) })
		h.waitFor("web", func(s string) bool { return strings.Contains(s, "192.168.2.11") })
		ev := h.events.list()
		if len(ev) != 1 || ev[0] != "Service default/bad uid-bad Warning ServiceSkipped: port p/tcp (IPv4) not served on node node1: "+
			"ExternalIP 10.96.0.20:80/TCP already claimed as ClusterIP by default/web:p/tcp (IPv4)" {
			t.Fatalf("events %q, want one ServiceSkipped on default/bad (uid-bad) naming node1", ev)
		}
	})
}

func TestNodePortAddresses(t *testing.T) {
	a := netip.MustParseAddr
	node := &model.Node{Name: "node1", Addresses: []model.NodeAddress{{Type: "InternalIP", Address: "172.26.236.177"}, {Type: "Hostname", Address: "node1"}}}
	ifs := []netip.Addr{a("127.0.0.1"), a("172.26.236.177"), a("10.0.0.5"), a("fe80::1"), a("fd00:26:236::177")}
	for _, tc := range []struct {
		name string
		spec []string
		node *model.Node
		want []netip.Addr
	}{
		{"primary from Node", []string{"primary"}, node, []netip.Addr{a("172.26.236.177")}},
		{"primary without Node: interfaces, no loopback or link-local", []string{"primary"}, nil, []netip.Addr{a("10.0.0.5"), a("172.26.236.177"), a("fd00:26:236::177")}},
		{"CIDRs", []string{"172.26.236.0/24", "fd00::/8"}, node, []netip.Addr{a("172.26.236.177"), a("fd00:26:236::177")}},
		{"loopback CIDR never", []string{"127.0.0.0/8"}, node, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodePortAddresses(tc.spec, tc.node, ifs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	base := Config{NodeName: "n"}.WithDefaults()
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"no node", func(c *Config) { c.NodeName = "" }, "node name"},
		{"min above sync", func(c *Config) { c.MinSyncPeriod = time.Hour }, "min sync period"},
		{"two v4 CIDRs", func(c *Config) {
			c.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}
		}, "one per IP family"},
		{"bad nodeport addr", func(c *Config) { c.NodePortAddresses = []string{"eth0"} }, "neither a CIDR"},
		{"primary and CIDR", func(c *Config) { c.NodePortAddresses = []string{"primary", "10.0.0.0/8"} }, "cannot be combined"},
		{"unknown detect-local mode", func(c *Config) { c.DetectLocalMode = "PodCIDR" }, `detect-local mode "PodCIDR"`},
		{"bridge mode without a bridge", func(c *Config) { c.DetectLocalMode = LocalModeBridgeInterface }, "(--pod-bridge-interface): required"},
		{"prefix with a wildcard", func(c *Config) {
			c.DetectLocalMode, c.PodInterfaceNamePrefix = LocalModeInterfaceNamePrefix, "veth*"
		}, "not allowed in interface names"},
		{"bridge name too long", func(c *Config) {
			c.DetectLocalMode, c.PodBridgeInterface = LocalModeBridgeInterface, "a-very-long-bridge"
		}, "longer than 15 bytes"},
		{"masquerade mark of two bits", func(c *Config) { c.MasqueradeMark = 0x4001 }, "single bit"},
	} {
		c := base
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestProxierProbeFailureStopsRun: a kernel that refuses one of the data
// plane's expression kinds ends Run at start with an error that names the
// feature and wraps dataplane.ErrNotSupported; nothing is programmed.
func TestProxierProbeFailureStopsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kernel := nft.NewFake()
		kernel.FailOp = func(tx *nft.Tx, i int) error {
			if op := tx.Ops[i]; op.Kind == nft.OpAddRule && slices.ContainsFunc(op.Rule.Exprs, func(e nft.Expr) bool { _, ok := e.(nft.Random); return ok }) {
				return errors.New("no such file or directory")
			}
			return nil
		}
		store := model.NewStore()
		p, err := New(Config{NodeName: "node1", Families: []ipfamily.Family{ipfamily.IPv4}}, Deps{Store: store, DataPlane: nftables.New(kernel, ipfamily.IPv4)})
		if err != nil {
			t.Fatal(err)
		}
		store.Update(func(tx *model.Txn) {
			tx.SetService(service("web", "10.96.0.20", 80, model.ProtocolTCP))
			tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "192.168.2.10"))
			tx.SetSynced(true)
		})
		err = p.Run(context.Background())
		if !errors.Is(err, dataplane.ErrNotSupported) || !errors.Is(err, nft.ErrNotSupported) ||
			!strings.Contains(err.Error(), "data plane nftables: ") || !strings.Contains(err.Error(), "kernel lacks nft_numgen") {
			t.Fatalf("Run = %v, want a probe failure naming nft_numgen", err)
		}
		if tables, _ := kernel.Tables(context.Background(), ipfamily.IPv4); len(tables) != 0 {
			t.Errorf("tables after a failed probe: %v", tables)
		}
	})
}

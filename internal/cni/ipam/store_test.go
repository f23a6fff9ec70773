package ipam

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/cni/cnitest"
)

// Helper-process mode: the test binary, run with envHelper set, allocates for
// helperOwners owners in the store named by envHelper and prints the addresses.
const (
	envHelper    = "SVCNET_IPAM_TEST_HELPER"
	helperOwners = 6
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHelper); dir != "" {
		os.Exit(helper(dir))
	}
	os.Exit(m.Run())
}

func helper(dir string) int {
	s := NewStore(dir)
	subnets := []netip.Prefix{netip.MustParsePrefix("192.168.9.0/24")}
	for i := range helperOwners {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		x, err := s.Lock(ctx)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		got, err := Allocate(x, Owner{ContainerID: fmt.Sprintf("p%d-%d", os.Getpid(), i), IfName: "eth0"}, subnets)
		x.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(got[0])
	}
	return 0
}

func lock(t *testing.T, s *Store) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := s.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

var (
	v4 = netip.MustParsePrefix("192.168.1.0/24")
	v6 = netip.MustParsePrefix("fd00:192:168:1::/64")
)

func TestStoreLayout(t *testing.T) {
	dir := t.TempDir()
	x := lock(t, NewStore(dir))
	a := Allocation{Addr: netip.MustParseAddr("fd00:192:168:1::2"), Owner: Owner{"c1", "eth0"}}
	if err := x.Reserve(a); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "fd00:192:168:1::2"))
	if err != nil || string(b) != "c1\r\neth0" {
		t.Fatalf("address file = %q, %v; want host-local's format", b, err)
	}
	if err := x.Reserve(Allocation{Addr: a.Addr, Owner: Owner{"c2", "eth0"}}); !errors.Is(err, ErrTaken) {
		t.Fatalf("second Reserve: %v, want ErrTaken", err)
	}
	if err := x.SetLastReserved(v6, a.Addr); err != nil {
		t.Fatal(err)
	}
	if got := x.LastReserved(v6); got != a.Addr {
		t.Fatalf("LastReserved = %s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "last_reserved_ip.fd00:192:168:1::_64")); err != nil {
		t.Fatal(err)
	}
	// A crashed write's leftover disappears; other files are not allocations.
	if err := os.WriteFile(filepath.Join(dir, ".tmp-192.168.1.9"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	all, err := x.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0] != a {
		t.Fatalf("List = %v, want [%v]", all, a)
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-192.168.1.9")); !os.IsNotExist(err) {
		t.Fatalf("leftover temp file not removed: %v", err)
	}
	if err := x.Release(a.Addr); err != nil {
		t.Fatal(err)
	}
	if err := x.Release(a.Addr); err != nil {
		t.Fatalf("second Release: %v", err)
	}
}

func TestAllocateIdempotentRoundRobinAndRelease(t *testing.T) {
	x := lock(t, NewStore(t.TempDir()))
	c1, c2 := Owner{"c1", "eth0"}, Owner{"c2", "eth0"}
	got1, err := Allocate(x, c1, []netip.Prefix{v4, v6})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got1) != "[192.168.1.2 fd00:192:168:1::2]" {
		t.Fatalf("c1 got %v", got1)
	}
	again, err := Allocate(x, c1, []netip.Prefix{v4, v6})
	if err != nil || fmt.Sprint(again) != fmt.Sprint(got1) {
		t.Fatalf("repeated Allocate = %v, %v; want %v", again, err, got1)
	}
	got2, _ := Allocate(x, c2, []netip.Prefix{v4, v6})
	if fmt.Sprint(got2) != "[192.168.1.3 fd00:192:168:1::3]" {
		t.Fatalf("c2 got %v", got2)
	}
	if freed, err := Release(x, c1); err != nil || len(freed) != 2 {
		t.Fatalf("Release c1 = %v, %v", freed, err)
	}
	// Round robin: c1's freed .2 is not handed out again before the range wraps.
	got3, _ := Allocate(x, Owner{"c3", "eth0"}, []netip.Prefix{v4})
	if got3[0].String() != "192.168.1.4" {
		t.Fatalf("c3 got %v, want 192.168.1.4 (after the last reserved)", got3)
	}
	if freed, err := Release(x, Owner{"unknown", "eth0"}); err != nil || len(freed) != 0 {
		t.Fatalf("Release of an unknown owner = %v, %v", freed, err)
	}
	owned, _ := Owned(x, c2)
	if fmt.Sprint(owned) != "[192.168.1.3 fd00:192:168:1::3]" {
		t.Fatalf("Owned(c2) = %v", owned)
	}
}

func TestAllocateAllOrNothing(t *testing.T) {
	x := lock(t, NewStore(t.TempDir()))
	tiny := netip.MustParsePrefix("fd00::/126") // 2 usable
	for i := range 2 {
		if _, err := Allocate(x, Owner{fmt.Sprint("c", i), "eth0"}, []netip.Prefix{v4, tiny}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Allocate(x, Owner{"c9", "eth0"}, []netip.Prefix{v4, tiny})
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted", err)
	}
	if owned, _ := Owned(x, Owner{"c9", "eth0"}); len(owned) != 0 {
		t.Fatalf("failed Allocate left %v reserved", owned)
	}
	if err := Available(x, []netip.Prefix{v4, tiny}); !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "fd00::/126") {
		t.Fatalf("Available = %v, want exhaustion of fd00::/126", err)
	}
	if err := Available(x, []netip.Prefix{v4}); err != nil {
		t.Fatalf("Available(v4) = %v", err)
	}
}

func TestGC(t *testing.T) {
	x := lock(t, NewStore(t.TempDir()))
	for _, id := range []string{"a", "b", "c"} {
		if _, err := Allocate(x, Owner{id, "eth0"}, []netip.Prefix{v4}); err != nil {
			t.Fatal(err)
		}
	}
	freed, err := GC(x, func(o Owner) bool { return o == Owner{"b", "eth0"} })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(freed) != "[192.168.1.2 a/eth0 192.168.1.4 c/eth0]" {
		t.Fatalf("GC freed %v", freed)
	}
	all, _ := x.List()
	if len(all) != 1 || all[0].ContainerID != "b" {
		t.Fatalf("after GC: %v", all)
	}
}

// Many goroutines, each with its own Session (its own flock), never get the
// same address.
func TestConcurrentGoroutines(t *testing.T) {
	s := NewStore(t.TempDir())
	const n = 40
	var mu sync.Mutex
	seen := map[netip.Addr]string{}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			x, err := s.Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer x.Close()
			id := fmt.Sprint("g", i)
			got, err := Allocate(x, Owner{id, "eth0"}, []netip.Prefix{v4})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := seen[got[0]]; dup {
				errs <- fmt.Errorf("%s given to %s and %s", got[0], other, id)
			}
			seen[got[0]] = id
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(seen) != n {
		t.Fatalf("%d distinct addresses for %d owners", len(seen), n)
	}
}

// Several processes allocating at once from one store never get the same
// address: the flock is what serialises them.
func TestConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	const procs = 6
	type out struct {
		lines []string
		err   error
	}
	outs := make(chan out, procs)
	for range procs {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envHelper+"="+dir)
			b, err := cmd.Output()
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			var lines []string
			sc := bufio.NewScanner(strings.NewReader(string(b)))
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			outs <- out{lines, err}
		}()
	}
	seen := map[string]bool{}
	for range procs {
		o := <-outs
		if o.err != nil {
			t.Fatalf("helper process: %v", o.err)
		}
		for _, l := range o.lines {
			if seen[l] {
				t.Errorf("%s handed out twice", l)
			}
			seen[l] = true
		}
	}
	if len(seen) != procs*helperOwners {
		t.Fatalf("%d distinct addresses, want %d", len(seen), procs*helperOwners)
	}
	x := lock(t, NewStore(dir))
	all, err := x.List()
	if err != nil || len(all) != procs*helperOwners {
		t.Fatalf("store holds %d allocations (%v), want %d", len(all), err, procs*helperOwners)
	}
}

// A second Lock waits for the first and gives up when its context ends.
func TestLockExcludesAndTimesOut(t *testing.T) {
	s := NewStore(t.TempDir())
	x := lock(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock while held: %v, want deadline exceeded", err)
	}
	x.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	y, err := s.Lock(ctx2)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	y.Close()
}

// An owner is recorded only when its address file reads back as the same
// owner: fields that would run together or be trimmed away are refused and
// leave no file, so one record never names two attachments.
func TestReserveRefusesAmbiguousOwners(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	x := lock(t, NewStore(dir))
	before := cnitest.Snapshot(t, root)
	addr := netip.MustParseAddr("192.168.1.2")
	for _, o := range []Owner{
		{"", "eth0"},
		{"c1", ""},
		{"c1\r\neth1", "eth0"}, // would read back as c1 / "eth1\r\neth0"
		{"c1", "eth0\r\nx"},
		{"c1 ", "eth0"}, // would read back as c1
		{" c1", "eth0"},
		{"c1", "eth0\n"},
		{"c\x001", "eth0"},
		{"c1", "eth\t0"},
		{"c1", "eth\u00a00"},
	} {
		err := x.Reserve(Allocation{Addr: addr, Owner: o})
		if !errors.Is(err, ErrBadOwner) {
			t.Errorf("Reserve for %q/%q: %v, want ErrBadOwner", o.ContainerID, o.IfName, err)
		}
		if _, err := Allocate(x, o, []netip.Prefix{v4}); !errors.Is(err, ErrBadOwner) {
			t.Errorf("Allocate for %q/%q: %v, want ErrBadOwner", o.ContainerID, o.IfName, err)
		}
	}
	if d := before.Diff(cnitest.Snapshot(t, root)); len(d) != 0 {
		t.Fatalf("refused owners changed the tree:\n%s", strings.Join(d, "\n"))
	}
	// Owners that a naive join would mix up stay apart.
	for _, o := range []Owner{{"a.b", "c"}, {"a", "b.c"}, {"ab", "c"}, {"a", "bc"}} {
		if _, err := Allocate(x, o, []netip.Prefix{v4}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []Owner{{"a.b", "c"}, {"a", "b.c"}, {"ab", "c"}, {"a", "bc"}} {
		if owned, err := Owned(x, o); err != nil || len(owned) != 1 {
			t.Errorf("Owned(%v) = %v, %v; want one address", o, owned, err)
		}
	}
	if freed, _ := Release(x, Owner{"a", "b.c"}); len(freed) != 1 {
		t.Fatalf("Release freed %v", freed)
	}
	all, _ := x.List()
	if fmt.Sprint(all) != "[192.168.1.2 a.b/c 192.168.1.4 ab/c 192.168.1.5 a/bc]" {
		t.Fatalf("after releasing a/b.c: %v", all)
	}
}

// A store belongs to the first network that claims it; another network's
// claim fails and changes nothing.
func TestClaim(t *testing.T) {
	dir := t.TempDir()
	x := lock(t, NewStore(dir))
	if n, err := x.Network(); err != nil || n != "" {
		t.Fatalf("Network of a new store = %q, %v", n, err)
	}
	if err := x.Claim("svcnet"); err != nil {
		t.Fatal(err)
	}
	if err := x.Claim("svcnet"); err != nil {
		t.Fatalf("second Claim by the owner: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "network")); err != nil || string(b) != "svcnet" {
		t.Fatalf("network file = %q, %v", b, err)
	}
	err := x.Claim("other")
	if !errors.Is(err, ErrForeignStore) || !strings.Contains(err.Error(), `store belongs to another network "svcnet", not "other"`) {
		t.Fatalf("Claim by another network: %v", err)
	}
	if n, _ := x.Network(); n != "svcnet" {
		t.Fatalf("Network after a refused claim = %q", n)
	}
	all, err := x.List()
	if err != nil || len(all) != 0 {
		t.Fatalf("the network file is taken for an allocation: %v, %v", all, err)
	}
}

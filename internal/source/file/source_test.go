package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"golang.org/x/sys/unix"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/logtest"
	"github.com/svcnet/svcnet/internal/model"
)

// waitFor waits, bounded, until cond holds on a fresh snapshot.
func waitFor(t *testing.T, sub *model.Subscription, what string, cond func(*model.Snapshot) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-sub.C():
			if snap, _ := sub.Next(); cond(snap) {
				return
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// runSource runs a Source of opts feeding a new store until the test ends,
// and returns a subscription to the store.
func runSource(t *testing.T, opts Options, log klog.Logger) *model.Subscription {
	t.Helper()
	store := model.NewStore()
	sub := store.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(opts, store, log).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not stop")
		}
		sub.Close()
	})
	return sub
}

func TestSourceWatchesManifests(t *testing.T) {
	dir := copySeed(t)
	sub := runSource(t, Options{Path: dir}, klog.Background())
	key := model.ServiceKey{Namespace: "default", Name: "my-nginx"}
	waitFor(t, sub, "initial load", func(s *model.Snapshot) bool { return s.Synced && s.Service(key) != nil })

	// A new file: its Service appears.
	writeFile(t, filepath.Join(dir, "extra.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: extra}\nspec: {ports: [{port: 81}]}\n")
	extra := model.ServiceKey{Namespace: "default", Name: "extra"}
	waitFor(t, sub, "extra Service", func(s *model.Snapshot) bool { return s.Service(extra) != nil })

	// Made invalid: the bad version is left out, everything else keeps being served.
	writeFile(t, filepath.Join(dir, "extra.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: extra}\nspec: {ports: [{port: 0}]}\n")
	waitFor(t, sub, "invalid extra left out", func(s *model.Snapshot) bool { return s.Service(extra) == nil && s.Service(key) != nil })

	// Fixed again: it is served again.
	writeFile(t, filepath.Join(dir, "extra.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: extra}\nspec: {ports: [{port: 82}]}\n")
	waitFor(t, sub, "extra back", func(s *model.Snapshot) bool {
		st := s.Service(extra)
		return st != nil && st.Service.Ports[0].Port == 82
	})
}

// TestSourceServesWhatItCannotPersist: when the state file cannot be
// written, the Services are still served (their allocations are what a
// later load against the older state gives again) and the failure is
// logged.
func TestSourceServesWhatItCannotPersist(t *testing.T) {
	netnstest.RequireRoot(t) // to make a directory immutable
	dir := copySeed(t)
	stateDir := t.TempDir()
	// The state's directory refuses new files (the atomic write's
	// temporary file), even to root, and still reads.
	setImmutable(t, stateDir, true)
	t.Cleanup(func() { setImmutable(t, stateDir, false) })
	var sink logtest.Sink
	sub := runSource(t, Options{Path: dir, StatePath: filepath.Join(stateDir, "state.json")}, sink.Logger(0))
	key := model.ServiceKey{Namespace: "default", Name: "my-nginx"}
	waitFor(t, sub, "initial load", func(s *model.Snapshot) bool { return s.Synced && s.Service(key) != nil })
	deadline := time.Now().Add(5 * time.Second)
	for sink.Count("Persisting allocations") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if sink.Count("Persisting allocations", "operation not permitted") == 0 {
		t.Errorf("the failed write was not logged:\n%s", strings.Join(sink.Lines(), "\n"))
	}
}

// setImmutable sets or clears the immutable attribute of path (chattr +i).
func setImmutable(t *testing.T, path string, on bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatalf("%s: get flags: %v", path, err)
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	v := int(flags)
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, v); err != nil {
		t.Fatalf("%s: set flags: %v", path, err)
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h.
const fsImmutableFL = 0x00000010

// TestSourceWritesAfterProgrammed: with WriteAfter, the first load is
// served at once and its state file written only once programmed is
// closed; a change meanwhile is served after those writes, and its own
// allocations are persisted as before. Run ending before programmed still
// writes the first load's state.
func TestSourceWritesAfterProgrammed(t *testing.T) {
	dir := copySeed(t)
	state := StatePathFor(dir)
	programmed := make(chan struct{})
	store := model.NewStore()
	sub := store.Subscribe()
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := New(Options{Path: dir}, store, klog.Background())
	s.WriteAfter(programmed)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	key := model.ServiceKey{Namespace: "default", Name: "my-nginx"}
	waitFor(t, sub, "first load", func(snap *model.Snapshot) bool { return snap.Synced && snap.Service(key) != nil })
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("state file before the first load was programmed: %v; want none yet", err)
	}

	// A change before programmed waits for the first writes, then is
	// served.
	writeFile(t, filepath.Join(dir, "extra.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: extra}\nspec: {ports: [{port: 81}]}\n")
	extra := model.ServiceKey{Namespace: "default", Name: "extra"}
	time.Sleep(300 * time.Millisecond)
	if snap := store.Snapshot(); snap.Service(extra) != nil {
		t.Fatalf("the change was served before the first load's writes")
	}
	close(programmed)
	waitFor(t, sub, "extra Service", func(snap *model.Snapshot) bool { return snap.Service(extra) != nil })
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(state)
		if err == nil && strings.Contains(string(b), `"default/extra"`) && strings.Contains(string(b), `"default/my-nginx"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state file never held both Services: %v\n%s", err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	// Stopped before its first load was programmed: the state is written
	// on the way out.
	dir2 := copySeed(t)
	ctx2, cancel2 := context.WithCancel(context.Background())
	store2 := model.NewStore()
	sub2 := store2.Subscribe()
	defer sub2.Close()
	s2 := New(Options{Path: dir2}, store2, klog.Background())
	s2.WriteAfter(make(chan struct{}))
	done2 := make(chan error, 1)
	go func() { done2 <- s2.Run(ctx2) }()
	waitFor(t, sub2, "first load", func(snap *model.Snapshot) bool { return snap.Synced })
	cancel2()
	select {
	case err := <-done2:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
	if _, err := os.Stat(StatePathFor(dir2)); err != nil {
		t.Errorf("no state file after Run stopped before programmed: %v", err)
	}
}

// TestSourceReportsEachProblemOnce: an invalid object and a LoadBalancer
// pending are logged by the load that first finds them, not again by the
// reloads after it, and their end is logged once.
func TestSourceReportsEachProblemOnce(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: 0}]}\n")
	writeFile(t, filepath.Join(dir, "lb.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: lb}\nspec: {type: LoadBalancer, ports: [{port: 80}]}\n")
	var sink logtest.Sink
	sub := runSource(t, Options{Path: dir}, sink.Logger(0))
	lb := model.ServiceKey{Namespace: "default", Name: "lb"}
	waitFor(t, sub, "initial load", func(s *model.Snapshot) bool { return s.Synced && s.Service(lb) != nil })
	for i := range 3 {
		name := fmt.Sprintf("extra-%d", i)
		writeFile(t, filepath.Join(dir, name+".yaml"), fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec: {ports: [{port: 80}]}\n", name))
		key := model.ServiceKey{Namespace: "default", Name: name}
		waitFor(t, sub, name, func(s *model.Snapshot) bool { return s.Service(key) != nil })
	}
	if n, m := sink.Count("Invalid object left out", "default/bad"), sink.Count("Object not fully served", "default/lb"); n != 1 || m != 1 {
		t.Errorf("after 4 loads: the invalid Service logged %d times, the pending one %d; want once each:\n%s", n, m, strings.Join(sink.Lines(), "\n"))
	}
	writeFile(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: 81}]}\n")
	bad := model.ServiceKey{Namespace: "default", Name: "bad"}
	waitFor(t, sub, "bad fixed", func(s *model.Snapshot) bool { return s.Service(bad) != nil })
	if n := sink.Count("No longer reported", "default/bad"); n != 1 {
		t.Errorf("the fix logged %d times, want once:\n%s", n, strings.Join(sink.Lines(), "\n"))
	}
	if n := sink.Count("No longer reported", "default/lb"); n != 0 {
		t.Errorf("the pending LoadBalancer, still pending, logged as gone %d times", n)
	}
}

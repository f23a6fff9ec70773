package file

import (
	"context"
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

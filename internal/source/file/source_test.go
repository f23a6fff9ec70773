package file

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/klog/v2"

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

func TestSourceWatchesManifests(t *testing.T) {
	dir := copySeed(t)
	store := model.NewStore()
	sub := store.Subscribe()
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(Options{Path: dir}, store, klog.Background()).Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not stop")
		}
	}()
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

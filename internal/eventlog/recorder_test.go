package eventlog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// File records what a proxy reports as the API server would keep it: the
// reference, source and times of each event, a repeat counted, nothing
// lost across recorders of the same file.
func TestFileRecorder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node1.json")
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	var failed []error
	f := &File{Path: path, Source: corev1.EventSource{Component: "svcnet-proxy", Host: "node1"}, Now: now,
		OnError: func(err error) { failed = append(failed, err) }}
	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: "default", Name: "web", UID: "u1"}
	f.Eventf(ref, corev1.EventTypeWarning, "ServiceSkipped", "port %s not served on node %s", "http", "node1")
	at = at.Add(time.Second)
	f.Event(ref, corev1.EventTypeNormal, "Served", "served again")
	at = at.Add(time.Second)
	again := &File{Path: path, Source: f.Source, Now: now}
	again.Event(ref, corev1.EventTypeWarning, "ServiceSkipped", "port http not served on node node1")
	got, err := Read(path)
	if err != nil || len(failed) > 0 {
		t.Fatal(err, failed)
	}
	if len(got) != 2 {
		t.Fatalf("kept %d events, want 2: %+v", len(got), got)
	}
	e := got[1] // last seen last
	if e.Reason != "ServiceSkipped" || e.Count != 2 || e.InvolvedObject != *ref || e.Source != f.Source ||
		e.Namespace != "default" || !e.FirstTimestamp.Time.Equal(at.Add(-2*time.Second)) || !e.LastTimestamp.Time.Equal(at) {
		t.Errorf("event %+v", e)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := &File{Path: filepath.Join(notDir, "x.json"), OnError: func(err error) { failed = append(failed, err) }}
	bad.Event(ref, corev1.EventTypeNormal, "X", "x")
	if len(failed) != 1 {
		t.Errorf("a file that cannot be written: %d errors reported, want 1", len(failed))
	}
}

package eventlog

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func lbEvent(name, reason, msg string, at time.Time) corev1.Event {
	t := metav1.NewTime(at)
	return corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s.%x", name, at.UnixNano())},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: name, UID: types.UID("u-" + name)},
		Reason:         reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: t, LastTimestamp: t,
		Source: corev1.EventSource{Component: "svcnet-lb-controller"}}
}

// summary lists events as "name reason count" lines, for comparison.
func summary(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprintf("%s %s x%d last=%s", e.InvolvedObject.Name, e.Reason, e.Count, e.LastTimestamp.Format("15:04:05")))
	}
	return out
}

func TestRecordEventsKeepsChanges(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	var kept []corev1.Event
	step := func(at time.Duration, fresh ...corev1.Event) {
		kept = Record(kept, fresh, t0.Add(at))
	}
	pending := func(at time.Duration) corev1.Event {
		return lbEvent("web", "AllocationFailed", "no available IPs in pool lab", t0.Add(at))
	}
	allocated := func(at time.Duration) corev1.Event {
		return lbEvent("web", "IPAllocated", "Assigned IP 172.26.236.180 from pool lab", t0.Add(at))
	}
	step(0, pending(0))
	step(time.Second, pending(time.Second)) // the same news again: left out
	step(2*time.Second, allocated(2*time.Second), lbEvent("db", "IPAllocated", "Assigned IP 172.26.236.181 from pool lab", t0.Add(2*time.Second)))
	step(3*time.Second, allocated(3*time.Second))
	step(4*time.Second, pending(4*time.Second)) // pending again: the older event counts twice
	got := fmt.Sprint(summary(kept))
	want := "[db IPAllocated x1 last=10:00:02 web IPAllocated x1 last=10:00:02 web AllocationFailed x2 last=10:00:04]"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// An hour without news drops what was not seen again.
	step(time.Hour+3*time.Second, pending(time.Hour+3*time.Second))
	if got, want := fmt.Sprint(summary(kept)), "[web AllocationFailed x2 last=10:00:04]"; got != want {
		t.Errorf("after the TTL: got %s, want %s", got, want)
	}
}

func TestRecordEventsBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	var fresh []corev1.Event
	for i := range Max + 10 {
		fresh = append(fresh, lbEvent(fmt.Sprintf("svc-%04d", i), "IPAllocated", "x", t0.Add(time.Duration(i)*time.Millisecond)))
	}
	kept := Record(nil, fresh, t0.Add(time.Second))
	if len(kept) != Max || kept[0].InvolvedObject.Name != "svc-0010" {
		t.Fatalf("kept %d events from %s, want %d from svc-0010", len(kept), kept[0].InvolvedObject.Name, Max)
	}
}

package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of the embedded control plane's event store, as kube-apiserver
// bounds events: an event not seen again within eventTTL is dropped
// (--event-ttl's default), and at most maxEvents are kept, the most
// recently seen.
const (
	eventTTL  = time.Hour
	maxEvents = 1000
)

// recordEvents returns kept with fresh recorded at now, as client-go's
// event recorder and the API server keep them: a fresh event that says
// what the object's last event from the same source says (type, reason,
// message) is no news and is left out; one that repeats an older event of
// the object raises that event's count and last-seen time; any other is
// added. Events last seen before now-eventTTL are dropped, then all but
// the maxEvents last seen. kept is not modified; the result is sorted by
// last-seen time, then name.
func recordEvents(kept, fresh []corev1.Event, now time.Time) []corev1.Event {
	out := slices.Clone(kept)
	for _, e := range fresh {
		last := -1
		for i, k := range out {
			if sameObject(k, e) && k.Source == e.Source && (last < 0 || !k.LastTimestamp.Before(&out[last].LastTimestamp)) {
				last = i
			}
		}
		if last >= 0 && sameNews(out[last], e) {
			continue
		}
		if i := slices.IndexFunc(out, func(k corev1.Event) bool { return sameObject(k, e) && k.Source == e.Source && sameNews(k, e) }); i >= 0 {
			out[i].Count++
			out[i].LastTimestamp = e.LastTimestamp
			continue
		}
		out = append(out, e)
	}
	cutoff := metav1.NewTime(now.Add(-eventTTL))
	out = slices.DeleteFunc(out, func(e corev1.Event) bool { return e.LastTimestamp.Before(&cutoff) })
	slices.SortStableFunc(out, func(a, b corev1.Event) int {
		if c := a.LastTimestamp.Time.Compare(b.LastTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if len(out) > maxEvents {
		out = out[len(out)-maxEvents:]
	}
	return out
}

func sameObject(a, b corev1.Event) bool {
	x, y := a.InvolvedObject, b.InvolvedObject
	return x.Kind == y.Kind && x.Namespace == y.Namespace && x.Name == y.Name && x.UID == y.UID
}

func sameNews(a, b corev1.Event) bool {
	return a.Type == b.Type && a.Reason == b.Reason && a.Message == b.Message
}

// eventsPath is the embedded control plane's event store.
func (c *File) eventsPath() string { return c.names.Path("events.json") }

// Events are the events recorded so far (none before the first).
func (c *File) Events() ([]corev1.Event, error) {
	b, err := os.ReadFile(c.eventsPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l corev1.EventList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", c.eventsPath(), err)
	}
	return l.Items, nil
}

// record adds fresh to the event store (recordEvents).
func (c *File) record(fresh []corev1.Event, now time.Time) error {
	kept, err := c.Events()
	if err != nil {
		return err
	}
	b, err := json.Marshal(corev1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"},
		Items: recordEvents(kept, fresh, now)})
	if err != nil {
		return err
	}
	return writeFileAtomic(c.eventsPath(), b)
}

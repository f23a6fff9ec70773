// Package eventlog records Kubernetes Events: to a cluster's API server
// through client-go's broadcaster (Cluster), or where there is none (the
// embedded control plane, a file-mode proxy) in a JSON file of an
// EventList, with the API server's and client-go's recorder's rules for
// what is kept (Record), and a record.EventRecorder writing to such a file
// (File).
package eventlog

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

	"github.com/svcnet/svcnet/internal/atomicfile"
)

// Bounds of a kept event list, as kube-apiserver bounds events: an event
// not seen again within TTL is dropped (--event-ttl's default), and at
// most Max are kept, the most recently seen.
const (
	TTL = time.Hour
	Max = 1000
)

// Record returns kept with fresh recorded at now, as client-go's event
// recorder and the API server keep them: a fresh event that says what the
// object's last event from the same source says (type, reason, message)
// is no news and is left out; one that repeats an older event of the
// object raises that event's count and last-seen time; any other is
// added. Events last seen before now-TTL are dropped, then all but the
// Max last seen. kept is not modified; the result is sorted by last-seen
// time, then namespace and name.
func Record(kept, fresh []corev1.Event, now time.Time) []corev1.Event {
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
	cutoff := metav1.NewTime(now.Add(-TTL))
	out = slices.DeleteFunc(out, func(e corev1.Event) bool { return e.LastTimestamp.Before(&cutoff) })
	Sort(out)
	if len(out) > Max {
		out = out[len(out)-Max:]
	}
	return out
}

// Sort sorts events by last-seen time, then namespace and name.
func Sort(events []corev1.Event) {
	slices.SortStableFunc(events, func(a, b corev1.Event) int {
		if c := a.LastTimestamp.Time.Compare(b.LastTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

func sameObject(a, b corev1.Event) bool {
	x, y := a.InvolvedObject, b.InvolvedObject
	return x.Kind == y.Kind && x.Namespace == y.Namespace && x.Name == y.Name && x.UID == y.UID
}

func sameNews(a, b corev1.Event) bool {
	return a.Type == b.Type && a.Reason == b.Reason && a.Message == b.Message
}

// Read returns the events kept at path (none when there is no file).
func Read(path string) ([]corev1.Event, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l corev1.EventList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l.Items, nil
}

// Write replaces the events kept at path, atomically.
func Write(path string, events []corev1.Event) error {
	b, err := json.Marshal(corev1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: events})
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o644)
}

// Add records fresh at now in the file at path (Record).
func Add(path string, fresh []corev1.Event, now time.Time) error {
	kept, err := Read(path)
	if err != nil {
		return err
	}
	return Write(path, Record(kept, fresh, now))
}

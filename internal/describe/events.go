package describe

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/printers"
)

// EventsOf returns the events among all that are about the object of kind
// (empty: any kind) namespace/name with uid, as the API server selects
// them for kubectl describe (by involvedObject's kind, namespace, name
// and uid).
func EventsOf(all []corev1.Event, kind, namespace, name string, uid types.UID) []corev1.Event {
	var out []corev1.Event
	for _, e := range all {
		o := e.InvolvedObject
		if o.Name == name && o.Namespace == namespace && (kind == "" || o.Kind == kind) && (uid == "" || o.UID == uid) {
			out = append(out, e)
		}
	}
	return out
}

// eventsTable writes the Events section: nothing for nil events (events
// not shown), "<none>" for none, or a table of the events oldest
// last-seen first, each with its type, reason, age (and repeat count),
// source and message.
func eventsTable(w writer, events []corev1.Event, now time.Time) {
	if events == nil {
		return
	}
	if len(events) == 0 {
		w.write(level0, "Events:\t<none>\n")
		return
	}
	w.flush()
	events = append([]corev1.Event(nil), events...)
	sort.SliceStable(events, func(i, j int) bool {
		return events[i].LastTimestamp.Time.Before(events[j].LastTimestamp.Time)
	})
	w.write(level0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
	w.write(level1, "----\t------\t----\t----\t-------\n")
	for _, e := range events {
		first := since(now, e.EventTime.Time)
		if e.EventTime.IsZero() {
			first = since(now, e.FirstTimestamp.Time)
		}
		age := first
		switch {
		case e.Series != nil:
			age = fmt.Sprintf("%s (x%d over %s)", since(now, e.Series.LastObservedTime.Time), e.Series.Count, first)
		case e.Count > 1:
			age = fmt.Sprintf("%s (x%d over %s)", since(now, e.LastTimestamp.Time), e.Count, first)
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		msg := strings.TrimSpace(e.Message)
		if e.InvolvedObject.FieldPath != "" {
			msg = e.InvolvedObject.FieldPath + ": " + msg
		}
		w.write(level1, "%v\t%v\t%s\t%v\t%v\n", e.Type, e.Reason, age, from, msg)
	}
}

// since is kubectl's age of t at now ("<unknown>" for the zero time).
func since(now, t time.Time) string { return printers.Since(now, t) }

// rfc1123z is how describe writes a point in time.
func rfc1123z(t metav1.Time) string { return t.Time.Format(time.RFC1123Z) }

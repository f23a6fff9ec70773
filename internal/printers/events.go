package printers

import (
	"io"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Events prints `kubectl get events`: LAST SEEN TYPE REASON OBJECT
// MESSAGE, and with Wide SUBOBJECT and SOURCE before MESSAGE and FIRST
// SEEN, COUNT and NAME after it. OBJECT is kind/name in lower case.
func Events(w io.Writer, events []*corev1.Event, opts Options) error {
	cols := []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}
	if opts.Wide {
		cols = []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME"}
	}
	t := newTable(opts, true, cols...)
	for _, e := range events {
		first := Since(opts.Now, e.FirstTimestamp.Time)
		if e.FirstTimestamp.IsZero() {
			first = Since(opts.Now, e.EventTime.Time)
		}
		last := Since(opts.Now, e.LastTimestamp.Time)
		if e.LastTimestamp.IsZero() {
			last = first
		}
		count := e.Count
		if e.Series != nil {
			last, count = Since(opts.Now, e.Series.LastObservedTime.Time), e.Series.Count
		} else if count == 0 {
			count = 1
		}
		target := strings.ToLower(e.InvolvedObject.Kind)
		if e.InvolvedObject.Name != "" {
			target += "/" + e.InvolvedObject.Name
		}
		msg := strings.TrimSpace(e.Message)
		if opts.Wide {
			t.add(e, true, last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath, eventSource(e), msg, first,
				strconv.Itoa(int(count)), e.Name)
		} else {
			t.add(e, true, last, e.Type, e.Reason, target, msg)
		}
	}
	return t.write(w, "events")
}

// eventSource is the SOURCE cell: the component (or reporting
// controller), and ", HOST" (or reporting instance) when there is one.
func eventSource(e *corev1.Event) string {
	component, instance := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if instance == "" {
		instance = e.ReportingInstance
	}
	if instance == "" {
		return component
	}
	return component + ", " + instance
}

package cluster

import (
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/eventlog"
)

// eventsPath is the embedded control plane's event store.
func (c *File) eventsPath() string { return c.names.Path("events.json") }

// NodeEventsPath is where node's svcnet proxy keeps its events
// (--event-file): what it does not serve.
func (c *File) NodeEventsPath(node string) string { return c.names.Path("events", node+".json") }

// Events are the events recorded so far, the control plane's and the
// nodes' proxies', by last-seen time.
func (c *File) Events() ([]corev1.Event, error) {
	all, err := eventlog.Read(c.eventsPath())
	if err != nil {
		return nil, err
	}
	nodes, err := filepath.Glob(c.NodeEventsPath("*"))
	if err != nil {
		return nil, err
	}
	for _, p := range nodes {
		e, err := eventlog.Read(p)
		if err != nil {
			return nil, err
		}
		all = append(all, e...)
	}
	eventlog.Sort(all)
	return all, nil
}

// record adds fresh to the control plane's event store (eventlog.Record).
func (c *File) record(fresh []corev1.Event, now time.Time) error {
	return eventlog.Add(c.eventsPath(), fresh, now)
}

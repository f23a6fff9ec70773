package syncbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// WatchClock timestamps the arrival of ADDED events of Services in one
// namespace at this process: the moment the apiserver has committed a Service
// and its watchers (the proxies among them: all are served by the same watch
// cache) can see it. A change's latency from that moment to its element in
// the kernel is the proxy's own part, Kubernetes' "network programming
// latency" (from the change of the Service to its being reflected in the load
// balancing rules); the create-to-kernel latency adds the apiserver's Create
// call, whose ClusterIP allocation is O(Services) in kube-apiserver v1.36.
//
// The watch starts at the namespace's current resourceVersion, so it reports
// only Services created after StartWatchClock. It stops when ctx ends or Close
// is called; if the apiserver ends it early, Err says so and later Services
// are simply not seen (Seen reports false; nothing is guessed).
type WatchClock struct {
	w    watch.Interface
	done chan struct{}

	mu   sync.Mutex
	seen map[string]time.Time
	err  error
}

// StartWatchClock lists the namespace's Services (one item, for the
// resourceVersion) and watches from there.
func StartWatchClock(ctx context.Context, c kubernetes.Interface, namespace string) (*WatchClock, error) {
	l, err := c.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("watch clock: list services in %s: %w", namespace, err)
	}
	w, err := c.CoreV1().Services(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watch clock: watch services in %s: %w", namespace, err)
	}
	wc := &WatchClock{w: w, done: make(chan struct{}), seen: map[string]time.Time{}}
	go wc.run()
	return wc, nil
}

func (wc *WatchClock) run() {
	defer close(wc.done)
	for ev := range wc.w.ResultChan() {
		at := time.Now()
		switch ev.Type {
		case watch.Added:
			if s, ok := ev.Object.(*corev1.Service); ok {
				wc.mu.Lock()
				if _, dup := wc.seen[s.Name]; !dup {
					wc.seen[s.Name] = at
				}
				wc.mu.Unlock()
			}
		case watch.Error:
			wc.mu.Lock()
			wc.err = fmt.Errorf("watch clock: %v", ev.Object)
			wc.mu.Unlock()
		}
	}
	wc.mu.Lock()
	if wc.err == nil {
		wc.err = fmt.Errorf("watch clock: watch ended")
	}
	wc.mu.Unlock()
}

// Seen returns when the ADDED event of Service name arrived, waiting for it
// up to limit (the event and the kernel's element race: either may come first).
func (wc *WatchClock) Seen(ctx context.Context, name string, limit time.Duration) (time.Time, bool) {
	end := time.Now().Add(limit)
	for {
		wc.mu.Lock()
		at, ok := wc.seen[name]
		wc.mu.Unlock()
		if ok || time.Now().After(end) || ctx.Err() != nil {
			return at, ok
		}
		select {
		case <-ctx.Done():
		case <-wc.done:
			wc.mu.Lock()
			at, ok = wc.seen[name]
			wc.mu.Unlock()
			return at, ok
		case <-time.After(time.Millisecond):
		}
	}
}

// Err is why the watch ended early (nil while it runs).
func (wc *WatchClock) Err() error {
	select {
	case <-wc.done:
	default:
		return nil
	}
	wc.mu.Lock()
	defer wc.mu.Unlock()
	return wc.err
}

// Close stops the watch and waits for its goroutine.
func (wc *WatchClock) Close() {
	wc.w.Stop()
	<-wc.done
}

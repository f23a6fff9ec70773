package ebpf

import (
	"fmt"
	"sync"
)

// reaper runs the socket load balancer's Reap in the background after each
// Sync that changed something, so that a Sync does not wait out the RCU
// grace period (about 10 ms) a Reap begins with. Kicks while a Reap runs
// coalesce into one more.
type reaper struct {
	lb   SocketLB
	wake chan struct{}
	done chan struct{}

	mu      sync.Mutex
	lastErr error
}

func startReaper(lb SocketLB) *reaper {
	r := &reaper{lb: lb, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go r.run()
	return r
}

func (r *reaper) run() {
	defer close(r.done)
	for range r.wake {
		err := r.lb.Reap()
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
	}
}

// kick asks for a Reap and returns the error of the last one that ended,
// once: a Reap that keeps failing fails every Sync, which then compares
// everything.
func (r *reaper) kick() error {
	select {
	case r.wake <- struct{}{}:
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.lastErr
	r.lastErr = nil
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	return nil
}

// stop waits for a Reap in progress, and the one asked for, to end.
func (r *reaper) stop() {
	close(r.wake)
	<-r.done
}

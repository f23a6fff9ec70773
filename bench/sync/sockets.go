package syncbench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/model"
)

// benchCgroup is a child cgroup of the cgroup2 root made for one run of the
// eBPF plane: its socket load balancer attaches there, never to the root.
type benchCgroup struct {
	dir  string // the directory
	path string // its cgroup path, for --cgroup
}

func newBenchCgroup(name string) (*benchCgroup, error) {
	root, err := cgroup.Root()
	if err != nil {
		return nil, err
	}
	dir, err := cgroup.Child(root, name)
	if err != nil {
		return nil, err
	}
	if err := cgroup.Make(dir); err != nil {
		return nil, err
	}
	p, err := cgroup.Path(root, dir)
	if err != nil {
		return nil, err
	}
	return &benchCgroup{dir: dir, path: p}, nil
}

// remove removes the cgroup (nothing runs in it: the proxy only attached
// to it), waiting a bounded time.
func (c *benchCgroup) remove() error { return cgroup.Remove(c.dir, 5*time.Second) }

// SocketWait waits for a frontend to appear in the services map of the
// socket load balancer attached to the cgroup Dir.
type SocketWait struct {
	Dir  string
	view *socklb.View
}

// socketPoll is the interval of SocketWait's polling: the plane writes the
// map entry right after the nftables commit that Monitor sees, so the first
// look usually finds it.
const socketPoll = 50 * time.Microsecond

// Wait returns when frontend (TCP) is in the map, bounded by ctx.
func (w *SocketWait) Wait(ctx context.Context, frontend netip.AddrPort) (time.Time, error) {
	for {
		if w.view == nil {
			v, err := socklb.OpenAttached(w.Dir)
			if err != nil && !errors.Is(err, socklb.ErrNotAttached) {
				return time.Time{}, err
			}
			w.view = v
		}
		if w.view != nil {
			_, found, err := w.view.Lookup(frontend, model.ProtocolTCP)
			if err != nil {
				return time.Time{}, err
			}
			if found {
				return time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("frontend %v not in the socket load balancer's map: %w", frontend, ctx.Err())
		case <-time.After(socketPoll):
		}
	}
}

// Close releases the maps.
func (w *SocketWait) Close() {
	if w.view != nil {
		w.view.Close()
	}
}

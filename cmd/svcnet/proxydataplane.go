package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/conntrack"
	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/dataplane/planes"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
	"github.com/svcnet/svcnet/internal/proxy/metrics"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// validateDataPlane checks --data-plane: a known value (planes.Names), and
// with none at least one thing left to do (--pod-routes or --announce).
func (o *proxyOptions) validateDataPlane() error {
	if err := planes.Validate(o.dataPlane); err != nil {
		return err
	}
	if o.dataPlane == planes.None && !o.podRoutes && o.announce.mode == "" {
		return fmt.Errorf("--data-plane %s: nothing to do without --pod-routes or --announce", planes.None)
	}
	if !slices.Contains(servicetable.Schedulers, o.ebpfScheduler) {
		return fmt.Errorf("--ebpf-scheduler %q: want %s", o.ebpfScheduler, strings.Join(servicetable.Schedulers, ", "))
	}
	if o.cgroup != "" {
		if o.dataPlane != ebpfplane.Name {
			return fmt.Errorf("--cgroup %s: only --data-plane %s attaches to a cgroup (this is --data-plane %s)", o.cgroup, ebpfplane.Name, o.dataPlane)
		}
		if err := cgroup.CheckPath(o.cgroup); err != nil {
			return fmt.Errorf("--cgroup: %w", err)
		}
	}
	return nil
}

// defaultBPFPinDir is --bpf-pin-dir's default, under the BPF filesystem
// systemd mounts.
const defaultBPFPinDir = "/sys/fs/bpf/svcnet"

// planeOptions returns the options of opening the data plane from the
// flags (--cleanup cleans every plane with them). An unchanged
// --bpf-pin-dir whose BPF filesystem is not mounted (a proxy started by ip
// netns exec sees a fresh /sys) pins nothing, and says so.
func (o *proxyOptions) planeOptions(log klog.Logger) planes.Options {
	opt := planes.Options{Cgroup: o.cgroup, PinDir: o.bpfPinDir, Scheduler: o.ebpfScheduler, NoExternal: !o.ebpfExternal}
	if o.bpfPinDir == defaultBPFPinDir {
		var st unix.Statfs_t
		if err := unix.Statfs(filepath.Dir(defaultBPFPinDir), &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
			if o.dataPlane == ebpfplane.Name && !o.cleanup {
				log.Info("No BPF filesystem at /sys/fs/bpf: the socket load balancer is not pinned, and a restart loads it again", "bpfPinDir", o.bpfPinDir)
			}
			opt.PinDir = ""
		}
	}
	return opt
}

func withFamilies(opt planes.Options, fams []ipfamily.Family) planes.Options {
	opt.Families = fams
	return opt
}

// serviceDataPlane builds the Service data plane called name: the proxier
// driving it and the healthCheckNodePort servers; mem applies --memory-limit
// around the proxier's syncs, and synced learns of the first full one. It returns their run functions (each returns
// when ctx ends) and closeAll, which releases the kernel handles after they
// have returned. Nothing is programmed before a run function runs. events,
// when not nil, records the Services the proxier skips.
func serviceDataPlane(name string, opt planes.Options, cfg proxy.Config, store *model.Store, health *healthcheck.ProxyHealthServer, m *metrics.Metrics, mem *memoryPolicy, synced *programmedSignal, events record.EventRecorder, log klog.Logger) (runners []func(context.Context) error, closeAll func(), err error) {
	plane, closePlane, err := planes.Open(name, withFamilies(opt, cfg.Families))
	if err != nil {
		return nil, nil, err
	}
	svcHealth := healthcheck.NewServiceHealthServer(healthcheck.ServiceHealthConfig{
		NodeName: cfg.NodeName,
		Health:   health,
		Logger:   log.WithName("service-health"),
	})
	ct, err := conntrack.NewNetlink()
	if err != nil {
		_ = closePlane()
		return nil, nil, fmt.Errorf("conntrack: %w", err)
	}
	p, err := proxy.New(cfg, proxy.Deps{
		Store:          store,
		DataPlane:      plane,
		InterfaceAddrs: interfaceAddrs,
		Conntrack:      ct,
		ServiceHealth:  svcHealth,
		ProxyHealth:    health,
		Metrics:        m,
		Logger:         log,
		BeforeSync:     mem.beforeSync,
		OnSync: func(r proxy.SyncResult) {
			mem.afterSync(r)
			synced.observe(r)
		},
		Events: events,
	})
	if err != nil {
		ct.Close()
		_ = closePlane()
		return nil, nil, err
	}
	closeAll = func() {
		ct.Close()
		if err := closePlane(); err != nil {
			log.Error(err, "closing the data plane's kernel handles")
		}
	}
	return []func(context.Context) error{p.Run, svcHealth.Run}, closeAll, nil
}

// reportSynced stands for the Service data plane with --data-plane none: once
// the source has delivered its initial state it reports every family updated
// to the health server (with nothing of its own to program, the node agent is
// then as synced as it gets), and returns. It returns ctx's error if ctx ends
// first.
func reportSynced(ctx context.Context, store *model.Store, health *healthcheck.ProxyHealthServer, families []ipfamily.Family) error {
	sub := store.Subscribe()
	defer sub.Close()
	for !store.Snapshot().Synced {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sub.C():
			sub.Next()
		}
	}
	for _, f := range families {
		health.Updated(healthFamily(f))
	}
	return nil
}

// healthFamily is the name /healthz reports family f by.
func healthFamily(f ipfamily.Family) v1.IPFamily { return v1.IPFamily(f.String()) }

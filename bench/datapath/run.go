package datapathbench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/netns"
)

// Bounds of growing the cluster to a Service count.
const (
	batchServices   = 500              // filler Services per lab.Apply
	applyLimit      = 10 * time.Minute // applying one count's fillers (7.5 for 10k on the loaded machine)
	programmedLimit = 3 * time.Minute  // from the probe's apply until both nodes answer it
	pairAttempts    = 3                // measurements of a pair with a starved side
)

// scaler grows the cluster's Services to each count in turn.
type scaler struct {
	l       *lab.Lab
	applied int         // fillers applied so far
	probeNS []*netns.NS // a pod on each node, where the probe must answer
	probes  int
	probeIP netip.Addr // the last probe's ClusterIP
}

// growTo applies fillers until the cluster holds at least n Services, then a
// probe Service, and waits until the probe answers from a pod on every node.
// It returns the Services held, the apply time and the time from the start of
// the apply until the probe answered everywhere.
func (s *scaler) growTo(ctx context.Context, n int) (services int, apply, programmed time.Duration, err error) {
	have, err := serviceCount(ctx, s.l)
	if err != nil {
		return 0, 0, 0, err
	}
	want := s.applied + max(0, n-have-1) // the probe is one more
	t0 := time.Now()
	for s.applied < want {
		if time.Since(t0) > applyLimit {
			return 0, 0, 0, fmt.Errorf("fillers: %d of %d applied after %s", s.applied, want, applyLimit)
		}
		last := min(want, s.applied+batchServices)
		if errs := s.l.Apply(ctx, fillers(s.applied, last)); len(errs) > 0 {
			return 0, 0, 0, fmt.Errorf("fillers %d-%d: %v", s.applied, last-1, errs[0])
		}
		s.applied = last
	}
	apply = time.Since(t0)
	s.probes++
	name := fmt.Sprintf("probe-%d", s.probes)
	if errs := s.l.Apply(ctx, []controlplane.Object{probeService(name)}); len(errs) > 0 {
		return 0, 0, 0, fmt.Errorf("probe service %s: %v", name, errs[0])
	}
	if s.probeIP, err = clusterIPOf(ctx, s.l, name); err != nil {
		return 0, 0, 0, err
	}
	if err := s.probeAnswers(ctx, programmedLimit); err != nil {
		return 0, 0, 0, err
	}
	programmed = time.Since(t0)
	services, err = serviceCount(ctx, s.l)
	return services, apply, programmed, err
}

// probeAnswers waits, bounded by limit on each node, until the last probe
// answers from a pod on every node: both nodes' proxies have programmed every
// Service applied before it.
func (s *scaler) probeAnswers(ctx context.Context, limit time.Duration) error {
	for _, ns := range s.probeNS {
		if err := waitAnswer(ctx, ns, hostPort(s.probeIP, 80), limit); err != nil {
			return fmt.Errorf("probe service probe-%d: %w", s.probes, err)
		}
	}
	return nil
}

// clusterIPOf returns the Service's ClusterIP as the control plane allocated it.
func clusterIPOf(ctx context.Context, l *lab.Lab, name string) (a netip.Addr, err error) {
	r, err := l.Get(ctx)
	if err != nil {
		return a, err
	}
	for _, s := range r.Services {
		if s.Namespace == "default" && s.Name == name {
			return netip.ParseAddr(s.Spec.ClusterIP)
		}
	}
	return a, fmt.Errorf("service default/%s: not found", name)
}

// measureSlot measures every target in pairs (measurePair: the direct
// reference and the Service loaded in turns), pairs times, the first turn
// going to the direct side in odd pairs and to the Service in even ones, and
// appends the samples to res in pair order (direct[i] and service[i] are one
// pair). A pair with a starved side (errStarved) is measured again, at most
// pairAttempts times in all.
func measureSlot(ctx context.Context, sl slot, targets []target, d time.Duration, pairs int, res []pathResult, logf func(string, ...any)) error {
	for i, t := range targets {
		for k := range pairs {
			ds, ss, err := measurePair(ctx, t, d, k%2)
			for a := 2; a <= pairAttempts && errors.Is(err, errStarved); a++ {
				logf("round %d %s %s pair %d: %v; measured again", sl.round, sl.proxy, t.path, k+1, err)
				ds, ss, err = measurePair(ctx, t, d, k%2)
			}
			if err != nil {
				return fmt.Errorf("round %d %s %s pair %d: %w", sl.round, sl.proxy, t.path, k+1, err)
			}
			logf("round %d %-19s %-17s pair %d direct %s: ka %.0f/s nc %.0f/s connect p50 %s | service %s: ka %.0f/s nc %.0f/s connect p50 %s",
				sl.round, sl.proxy, t.path, k+1, t.directAddr, ds.keepAlive, ds.newConn, us(quantile(ds.probe, .5)),
				t.svcAddr, ss.keepAlive, ss.newConn, us(quantile(ss.probe, .5)))
			res[i].direct = append(res[i].direct, ds)
			res[i].service = append(res[i].service, ss)
		}
	}
	return nil
}

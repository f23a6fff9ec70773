package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrLeadershipLost is returned by RunLeaderElected when the lease was lost (not
// renewed within the renew deadline, or taken over) while ctx was still live.
// The caller should exit; its Deployment restarts it as a fresh candidate, as
// kube-controller-manager does.
var ErrLeadershipLost = errors.New("leader election lost")

// Leader-election timing defaults: kube-controller-manager's.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// LeaderElection names the coordination.k8s.io Lease that elects one leader
// among candidates, and its timing (kube-controller-manager's flags
// --leader-elect-lease-duration, --leader-elect-renew-deadline,
// --leader-elect-retry-period). Zero durations take the defaults above, scaled
// to a non-default LeaseDuration (renew 2/3 of it, retry 2/15 of it).
type LeaderElection struct {
	// Identity is this candidate's holderIdentity; unique per process.
	Identity string
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// LeaseDuration is how long a non-leader waits after the last renewal seen
	// before it takes over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a renewal before it
	// gives up leadership.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between tries to acquire or renew.
	RetryPeriod time.Duration
}

// withDefaults fills zero durations (see LeaderElection).
func (le LeaderElection) withDefaults() LeaderElection {
	if le.LeaseDuration <= 0 {
		le.LeaseDuration = DefaultLeaseDuration
	}
	if le.RenewDeadline <= 0 {
		le.RenewDeadline = le.LeaseDuration * 2 / 3
	}
	if le.RetryPeriod <= 0 {
		le.RetryPeriod = le.LeaseDuration * 2 / 15
	}
	return le
}

// RunLeaderElected campaigns for the Lease le names and calls run while, and
// only while, this candidate holds it. It returns:
//   - nil when ctx ends (while waiting, or while leading once run has returned;
//     an error run returns other than a context error is returned instead);
//   - an error wrapping ErrLeadershipLost when the lease was lost while ctx was
//     live: run's context was cancelled and run has returned;
//   - run's error when run returns while leading and ctx is live (nil if run
//     returned nil);
//   - a configuration error (empty identity, inconsistent timing) at once.
//
// run's context ends when ctx ends or leadership is lost; run must return
// promptly then. The lease is renewed until run has returned, and then, if this
// candidate still holds it, released (the holder cleared), so a successor takes
// over within one retry period instead of a whole lease duration, and never
// while run may still be writing.
func RunLeaderElected(ctx context.Context, client kubernetes.Interface, le LeaderElection, run func(ctx context.Context) error) error {
	le = le.withDefaults()
	if le.Identity == "" || le.Namespace == "" || le.Name == "" {
		return fmt.Errorf("leader election: identity %q, lease %s/%s: none may be empty", le.Identity, le.Namespace, le.Name)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: le.Identity})
	if err != nil {
		return fmt.Errorf("leader election lease %s/%s: %w", le.Namespace, le.Name, err)
	}
	log := klog.FromContext(ctx).WithValues("lease", le.Namespace+"/"+le.Name, "identity", le.Identity)

	// The elector's context outlives ctx while leading: it is cancelled only once
	// run has returned, so the lease is held for as long as run may write.
	elCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	leading := make(chan context.Context)
	elected := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          le.Name,
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				select {
				case leading <- lctx:
				case <-elected:
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != le.Identity {
					log.Info("Observed leader", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election lease %s/%s: %w", le.Namespace, le.Name, err)
	}
	go func() {
		defer close(elected)
		elector.Run(elCtx)
	}()

	// finish stops the elector and waits for it, then releases the lease if
	// this candidate still holds it. Call it only once run is not running.
	finish := func() {
		stopElector()
		<-elected
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), le.RenewDeadline)
		defer cancel()
		if err := releaseLease(relCtx, lock); err != nil {
			log.Error(err, "Releasing the lease failed; a successor takes over once it expires")
		}
	}

	var lctx context.Context
	select {
	case <-ctx.Done():
		finish()
		return nil
	case <-elected:
		finish()
		// Run returns without leading only when its context ends, which here
		// happens only through ctx; or it led and lost before run could start.
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("lease %s/%s: %w before starting", le.Namespace, le.Name, ErrLeadershipLost)
	case lctx = <-leading:
	}

	log.Info("Became leader")
	runCtx, stopRun := context.WithCancel(lctx)
	stopAfter := context.AfterFunc(ctx, stopRun)
	runErr := run(runCtx)
	stopAfter()
	stopRun()
	lost := lctx.Err() != nil && ctx.Err() == nil
	finish()
	log.Info("Stopped leading", "lost", lost)
	switch {
	case runErr != nil && !errors.Is(runErr, context.Canceled):
		return runErr
	case lost:
		return fmt.Errorf("lease %s/%s held by %s: %w", le.Namespace, le.Name, le.Identity, ErrLeadershipLost)
	}
	return nil
}

// releaseLease clears the Lease's holder if it is still lock's identity, with a
// one-second lease duration, as client-go's ReleaseOnCancel does. Call it only
// when no elector is using lock.
func releaseLease(ctx context.Context, lock resourcelock.Interface) error {
	rec, _, err := lock.Get(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease %s: %w", lock.Describe(), err)
	}
	if rec.HolderIdentity != lock.Identity() {
		return nil
	}
	now := metav1.Now()
	err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", lock.Describe(), err)
	}
	return nil
}

package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// testLease is short leader-election timing for tests.
func testLease(id, name string) LeaderElection {
	return LeaderElection{
		Identity: id, Namespace: "kube-system", Name: name,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
	}
}

func (e *lbEnv) lease(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := e.Client.CoordinationV1().Leases("kube-system").Get(apiCtx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease %s: %v", name, err)
	}
	return l
}

func (e *lbEnv) waitHolder(t *testing.T, name, want string, timeout time.Duration) {
	t.Helper()
	kubetest.Eventually(t, timeout, "lease "+name+" held by "+want, func() (bool, string) {
		l, err := e.Client.CoordinationV1().Leases("kube-system").Get(apiCtx(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		h := ptr.Deref(l.Spec.HolderIdentity, "")
		return h == want, "holder " + h
	})
}

// TestLeaderElection (kube tier): of two controllers on one Lease only the
// leader writes; when it stops, the other takes over within the lease duration
// and writes; when its lease is taken from it, RunLeaderElected cancels the
// controller and returns ErrLeadershipLost.
func TestLeaderElection(t *testing.T) {
	e := startEnv(t)
	waitNamespace(t, e, "kube-system")
	e.createPool(t, "lab", "172.26.236.180-172.26.236.199")
	const leaseName = "svcnet-lb-controller"
	elected := func(id, manager string) *running {
		c := e.newController(t, e.Client, manager)
		return start(t, func(ctx context.Context) error {
			return RunLeaderElected(ctx, e.Client, testLease(id, leaseName), c.Run)
		})
	}

	a := elected("a", "lb-a")
	e.waitHolder(t, leaseName, "a", waitTimeout)
	b := elected("b", "lb-b")
	e.createService(t, "s1", "")
	e.waitIPs(t, "s1", "172.26.236.180")
	// Past a whole lease duration, a still leads (it renews) and b waits.
	time.Sleep(5 * time.Second)
	e.createService(t, "s2", "")
	e.waitIPs(t, "s2", "172.26.236.181")
	for _, name := range []string{"s1", "s2"} {
		if got := statusManagers(e.getService(t, name)); !slices.Equal(got, []string{"lb-a"}) {
			t.Errorf("%s status managers %q, want [lb-a]", name, got)
		}
	}
	if h := ptr.Deref(e.lease(t, leaseName).Spec.HolderIdentity, ""); h != "a" || b.returned() {
		t.Fatalf("lease holder %q (b returned: %v), want a, b waiting", h, b.returned())
	}

	stopped := time.Now()
	if err := a.stop(t); err != nil {
		t.Fatalf("RunLeaderElected(a) after cancel: %v, want nil", err)
	}
	e.waitHolder(t, leaseName, "b", 4*time.Second)
	t.Logf("b took over %v after a stopped", time.Since(stopped).Round(time.Millisecond))
	e.createService(t, "s3", "")
	s3 := e.waitIPs(t, "s3", "172.26.236.182")
	if got := statusManagers(s3); !slices.Equal(got, []string{"lb-b"}) {
		t.Errorf("s3 status managers %q, want [lb-b]", got)
	}
	for _, name := range []string{"s1", "s2"} {
		if got := statusManagers(e.getService(t, name)); slices.Contains(got, "lb-b") {
			t.Errorf("%s rewritten by the new leader: managers %q", name, got)
		}
	}

	// Someone else takes the lease: b must stop within its renew deadline.
	l := e.lease(t, leaseName)
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity = ptr.To("thief")
	l.Spec.LeaseDurationSeconds = ptr.To[int32](600)
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	if _, err := e.Client.CoordinationV1().Leases("kube-system").Update(apiCtx(t), l, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("take the lease: %v", err)
	}
	if err := b.wait(t, 10*time.Second); !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("RunLeaderElected(b) after losing the lease: %v, want ErrLeadershipLost", err)
	}
	if h := ptr.Deref(e.lease(t, leaseName).Spec.HolderIdentity, ""); h != "thief" {
		t.Errorf("lease holder %q after b lost it, want thief (b must not release another's lease)", h)
	}
}

// TestRunLeaderElectedRun (kube tier): run starts only once the lease is held;
// a candidate cancelled while waiting returns nil without running; run's error
// is returned and the lease released when run returns, so a waiting candidate
// takes over at once.
func TestRunLeaderElectedRun(t *testing.T) {
	e := startEnv(t)
	waitNamespace(t, e, "kube-system")
	boom := errors.New("boom")
	started := make(chan struct{})
	one := start(t, func(ctx context.Context) error {
		return RunLeaderElected(ctx, e.Client, testLease("one", "run-test"), func(ctx context.Context) error {
			close(started)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(4 * time.Second):
				return boom
			}
		})
	})
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("run not started")
	}
	if h := ptr.Deref(e.lease(t, "run-test").Spec.HolderIdentity, ""); h != "one" {
		t.Errorf("run started while the lease is held by %q", h)
	}

	never := make(chan struct{})
	cancelled := start(t, func(ctx context.Context) error {
		return RunLeaderElected(ctx, e.Client, testLease("cancelled", "run-test"), func(context.Context) error {
			close(never)
			return nil
		})
	})
	ran := make(chan struct{})
	two := start(t, func(ctx context.Context) error {
		return RunLeaderElected(ctx, e.Client, testLease("two", "run-test"), func(context.Context) error {
			close(ran)
			return nil
		})
	})
	time.Sleep(time.Second)
	if err := cancelled.stop(t); err != nil {
		t.Errorf("candidate cancelled while waiting: %v, want nil", err)
	}
	select {
	case <-never:
		t.Error("a candidate ran while another held the lease")
	default:
	}

	if err := one.wait(t, 10*time.Second); !errors.Is(err, boom) {
		t.Fatalf("RunLeaderElected returned %v, want run's error", err)
	}
	released := time.Now()
	// The lease was released, so two need not wait out one's lease duration.
	if err := two.wait(t, 3*time.Second); err != nil {
		t.Errorf("two: %v, want nil (its run returned nil)", err)
	}
	select {
	case <-ran:
		t.Logf("two ran %v after one's release", time.Since(released).Round(time.Millisecond))
	default:
		t.Error("two returned without running")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := RunLeaderElected(ctx, e.Client, testLease("", "run-test"), func(context.Context) error { return nil }); err == nil {
		t.Error("RunLeaderElected with an empty identity: no error")
	}
}

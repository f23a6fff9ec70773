package failoverbench

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/bench/benchenv"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/lab/supervise"
)

// Environment of TestBenchFailover.
const (
	// EnvKills is the number of rounds of each kind (default 20).
	EnvKills = "SVCNET_BENCH_KILLS"
)

const (
	// roundLimit bounds the wait for recovery in one round: far above the target,
	// so a slow failover is measured rather than cut off.
	roundLimit = 15 * time.Second
)

// TestBenchFailover is the failover benchmark (see the package doc). It skips
// unless SVCNET_BENCH is set.
func TestBenchFailover(t *testing.T) {
	benchenv.RootGate(t, "bench-failover")
	bin := benchenv.SvcnetBinary(t)
	kills := benchenv.Int(t, EnvKills, 20, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	l := labtest.Up(t, ctx, lab.Options{Name: labtest.Name("fo"), Nodes: 3, Binary: bin}, "fixture.yaml")
	ip, err := lbIP(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	dial, done, err := l.Dialer(lab.Place{NS: l.Names().Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	lp := &loop{dial: dial, addr: netip.AddrPortFrom(ip, 80).String(), interval: requestInterval, timeout: requestTimeout}
	lctx, stop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	go func() { lp.run(lctx); close(loopDone) }()
	defer func() { stop(); <-loopDone }()
	if err := settle(ctx, l, lp, ip); err != nil {
		t.Fatal(err)
	}

	var nodeFail, handover []time.Duration
	var silent, restarted tally
	for round := 1; round <= kills; round++ {
		d, owner, err := nodeFailure(ctx, l, lp, ip)
		if err != nil {
			t.Fatalf("node failure round %d: %v", round, err)
		}
		t.Logf("node failure %2d: owner node%d cut off and its agent killed; first success after %v", round, owner, d.Round(time.Millisecond))
		nodeFail = append(nodeFail, d)
		if err := restore(ctx, l, lp, ip, owner); err != nil {
			t.Fatalf("round %d: restore node%d: %v", round, owner, err)
		}
	}
	for round := 1; round <= kills; round++ {
		d, owner, failed, total, err := agentSilent(ctx, l, lp, ip)
		if err != nil {
			t.Fatalf("agent silent round %d: %v", round, err)
		}
		t.Logf("agent silent %2d: node%d's agent stopped; another node announces after %v; %d of %d requests failed meanwhile", round, owner, d.Round(time.Millisecond), failed, total)
		handover = append(handover, d)
		silent.add(failed, total, false)
		if err := restore(ctx, l, lp, ip, owner); err != nil {
			t.Fatalf("round %d: restore node%d: %v", round, owner, err)
		}
	}
	for round := 1; round <= kills; round++ {
		// A kill within 2×the supervisor's back-off cap of the last restart
		// meets a crash-loop back-off (a restart after 1 s, 2 s, ...) that
		// outlasts the Timeout, as the kubelet's would: each round starts
		// with the back-off expired.
		if err := sleep(ctx, 2*supervise.DefaultMaxBackoff+time.Second); err != nil {
			t.Fatal(err)
		}
		owner, failed, total, moved, err := agentRestart(ctx, l, lp, ip)
		if err != nil {
			t.Fatalf("agent restart round %d: %v", round, err)
		}
		t.Logf("agent restart %2d: node%d's agent killed and restarted; %d of %d requests failed; IP moved: %v", round, owner, failed, total, moved)
		restarted.add(failed, total, moved)
		if err := restore(ctx, l, lp, ip, owner); err != nil {
			t.Fatalf("round %d: restore node%d: %v", round, owner, err)
		}
	}
	rep := report{
		kills: kills, nodeFail: nodeFail, handover: handover,
		silent: silent, restarted: restarted, skipped: lp.skipped,
	}
	fmt.Print(rep.String())
	t.Log("\n" + rep.String())
}

// lbIP waits (bounded) until the Service fo has its LoadBalancer IP.
func lbIP(ctx context.Context, l *lab.Lab) (netip.Addr, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := l.Get(ctx)
		if err != nil {
			return netip.Addr{}, err
		}
		for _, s := range r.Services {
			if s.Namespace == "default" && s.Name == "fo" && len(s.Status.LoadBalancer.Ingress) > 0 {
				return netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return netip.Addr{}, fmt.Errorf("Service default/fo has no LoadBalancer IP after 30s")
}

// nodeFailure cuts the owner off and kills its agent, and returns the time from
// then to the first success of a request started afterwards.
func nodeFailure(ctx context.Context, l *lab.Lab, lp *loop, ip netip.Addr) (time.Duration, int, error) {
	owner, err := l.Announcer(ip)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := l.SetNodeLink(owner, false); err != nil {
		return 0, owner, err
	}
	if err := l.KillProxy(owner, syscall.SIGKILL); err != nil {
		return 0, owner, err
	}
	for time.Since(t0) < roundLimit {
		if at, ok := lp.firstSuccessAfter(t0); ok {
			return at.Sub(t0), owner, nil
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return 0, owner, err
		}
	}
	return 0, owner, fmt.Errorf("no request succeeded within %s of the failure of node%d", roundLimit, owner)
}

// agentSilent stops the owner's agent (SIGSTOP: silent, as a hung or dead
// agent, and not restarted) and returns the time until the client's neighbour
// entry names another node, and the requests that failed from the stop until
// a second after that. restore lets the agent go on.
func agentSilent(ctx context.Context, l *lab.Lab, lp *loop, ip netip.Addr) (d time.Duration, owner, failed, total int, err error) {
	if owner, err = l.Announcer(ip); err != nil {
		return 0, 0, 0, 0, err
	}
	t0 := time.Now()
	if err = signalProxy(l, owner, syscall.SIGSTOP); err != nil {
		return 0, owner, 0, 0, err
	}
	for {
		if n, err := l.Announcer(ip); err == nil && n != owner {
			d = time.Since(t0)
			break
		}
		if time.Since(t0) > roundLimit {
			return 0, owner, 0, 0, fmt.Errorf("no other node announces %s within %s of stopping node%d's agent", ip, roundLimit, owner)
		}
		if err = sleep(ctx, 5*time.Millisecond); err != nil {
			return 0, owner, 0, 0, err
		}
	}
	if err = sleep(ctx, time.Second+requestTimeout); err != nil {
		return 0, owner, 0, 0, err
	}
	failed, total = lp.failedBetween(t0, t0.Add(d+time.Second))
	return d, owner, failed, total, nil
}

// agentRestart kills the owner's agent, which its supervisor restarts at
// once, and returns the requests that failed from the kill until 3 s after
// (the restarted speaker's sync and warm-up), and whether the IP left the
// owner meanwhile (it should not: the restart grace keeps it there).
func agentRestart(ctx context.Context, l *lab.Lab, lp *loop, ip netip.Addr) (owner, failed, total int, moved bool, err error) {
	if owner, err = l.Announcer(ip); err != nil {
		return 0, 0, 0, false, err
	}
	t0 := time.Now()
	if err = l.KillProxy(owner, syscall.SIGKILL); err != nil {
		return owner, 0, 0, false, err
	}
	for time.Since(t0) < 3*time.Second {
		if n, err := l.Announcer(ip); err == nil && n != owner {
			moved = true
		}
		if err = sleep(ctx, 50*time.Millisecond); err != nil {
			return owner, 0, 0, false, err
		}
	}
	if err = sleep(ctx, requestTimeout); err != nil {
		return owner, 0, 0, false, err
	}
	failed, total = lp.failedBetween(t0, t0.Add(3*time.Second))
	return owner, failed, total, moved, nil
}

// signalProxy sends sig to node i's svcnet proxy.
func signalProxy(l *lab.Lab, i int, sig syscall.Signal) error {
	pid, err := l.ProxyPid(i)
	if err != nil {
		return err
	}
	if pid == 0 {
		return fmt.Errorf("node%d runs no svcnet proxy", i)
	}
	return syscall.Kill(pid, sig)
}

// restore reconnects node i, lets a stopped agent go on, restarts a dead
// one and waits until the IP has settled again.
func restore(ctx context.Context, l *lab.Lab, lp *loop, ip netip.Addr, i int) error {
	if err := l.SetNodeLink(i, true); err != nil {
		return err
	}
	if pid, err := l.ProxyPid(i); err != nil {
		return err
	} else if pid != 0 { // a stopped one; a killed one is being restarted
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			return err
		}
	}
	if err := l.StartProxy(ctx, i); err != nil {
		return err
	}
	return settle(ctx, l, lp, ip)
}

// settle waits until every request of the last second succeeded and the
// client's neighbour entry has not changed for 2 s (the restarted speaker's
// warm-up and any move back to it are over), bounded by 30 s.
func settle(ctx context.Context, l *lab.Lab, lp *loop, ip netip.Addr) error {
	deadline := time.Now().Add(30 * time.Second)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		n, err := l.Announcer(ip)
		if err != nil {
			n = 0
		}
		if n != last {
			last, since = n, time.Now()
		}
		now := time.Now()
		failed, total := lp.failedBetween(now.Add(-time.Second-requestTimeout), now.Add(-requestTimeout))
		if n != 0 && time.Since(since) >= 2*time.Second && failed == 0 && total > 0 {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s did not settle within 30s", ip)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

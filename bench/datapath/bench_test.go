package datapathbench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/bench/benchenv"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// Environment of TestBenchDatapath, besides benchenv's gate and svcnet binary
// and SVCNET_K8S_BIN (kubetest.EnvK8sBin; built by tools/k8s/build.sh when
// unset).
const (
	// EnvCounts lists the Service counts (default "1,1000,10000").
	EnvCounts = "SVCNET_BENCH_COUNTS"
	// EnvDuration is the length of one run (default defaultDuration).
	EnvDuration = "SVCNET_BENCH_DURATION"
	// EnvLab names the lab (default dpPID).
	EnvLab = "SVCNET_BENCH_LAB"
	// EnvProxies lists the proxies measured, of allProxies (default all).
	EnvProxies = "SVCNET_BENCH_PROXIES"
)

const (
	rounds = 3
	// pairs per path in each slot: 3 rounds x 3 pairs give each figure 9
	// runs a proxy. With 6 (2 pairs) the smallest p-value a rank-sum test
	// of 6 against 6 can give, 1/924, was above Holm's first threshold for
	// the comparison's 48 figures (5%/48): no figure could ever be worse.
	// With 9 against 9 it is 1/48620.
	pairs = 3
	// defaultDuration is one load's length a side: each pair is a keep-alive
	// load, a new-connection load and a connect probe of half as long, each
	// side, 1s; the default run's 45 slots of 4 paths x 3 pairs are 9
	// minutes of load, leaving the rest of runLimit (30 minutes for the
	// five proxies) to the lab, the 20,000 objects of the 10k fillers
	// through the apiserver (3.5 to 4 minutes here, 7.5 while others loaded
	// the machine: every watcher in the lab shares the 2 cores) and the swaps (kube-proxy iptables' first sync at
	// 10k takes about 40 s, nftables' about 15 s).
	defaultDuration = 200 * time.Millisecond
)

// TestBenchDatapath is the data-path benchmark (see the package doc). It skips
// unless SVCNET_BENCH is set.
func TestBenchDatapath(t *testing.T) {
	benchenv.RootGate(t, "bench-datapath")
	bin := benchenv.SvcnetBinary(t)
	_, k8sBin := kubetest.Binaries(t, "kube-apiserver", "kube-controller-manager", "kube-proxy")
	counts, err := parseCounts(envOr(EnvCounts, "1,1000,10000"))
	if err != nil {
		t.Fatalf("%s: %v", EnvCounts, err)
	}
	dur := benchenv.Duration(t, EnvDuration, defaultDuration)
	if dur < 100*time.Millisecond || dur > time.Minute {
		t.Fatalf("%s=%s: want a duration from 100ms to 1m", EnvDuration, dur)
	}
	proxies, err := parseProxies(envOr(EnvProxies, strings.Join(proxyNames(), ",")))
	if err != nil {
		t.Fatalf("%s: %v", EnvProxies, err)
	}
	limit := runLimit(len(proxies))
	slots := schedule(proxies, len(counts), rounds)
	if err := checkBudget(len(slots), len(allPaths), pairs, dur, limit); err != nil {
		t.Fatal(err)
	}
	hostBefore, err := hostSysctls()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	t.Logf("%d slots (%d counts x %d rounds x %d proxies), %d proxy swaps, bound %s", len(slots), len(counts), rounds, len(proxies), swaps(slots), limit)
	first, _ := proxyNamed(slots[0].proxy)
	l := labtest.Up(t, ctx, lab.Options{Name: envOr(EnvLab, labtest.Name("dp")), Nodes: 2, Binary: bin,
		ControlPlane: cluster.ControlPlaneKube, K8sBin: k8sBin, Proxy: first.labProxy, DataPlane: first.dataPlane}, "fixture.yaml")
	current := first.name // the proxy the lab runs
	addrs, err := waitServices(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	open := func(where string) (*netns.NS, lab.Place) {
		t.Helper()
		p, err := l.Resolve(ctx, where)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := netns.Open(p.NS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		return ns, p
	}
	cliNS, _ := open("cli")
	extNS, _ := open("client")
	remoteNS, remote := open("srv-remote")
	localNS, local := open("srv-local")
	remoteIP, err := podIP(remote.Pod)
	if err != nil {
		t.Fatal(err)
	}
	localIP, err := podIP(local.Pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []*netns.NS{cliNS, extNS} {
		if err := tuneClient(ns); err != nil {
			t.Fatal(err)
		}
	}
	if after, err := hostSysctls(); err != nil || after != hostBefore {
		t.Fatalf("host sysctls changed from %s to %s (%v): they must be written only in lab namespaces", hostBefore, after, err)
	}
	// srv-remote runs on node2 (fixture.yaml).
	if err := routeReference(ctx, l, remoteIP, 2); err != nil {
		t.Fatal(err)
	}
	direct := hostPort(remoteIP, 80)
	// cli runs on node1: the pod paths' load is node1's (target.cgroup).
	node1, err := l.Names().NodeCgroupDir(1)
	if err != nil {
		t.Fatal(err)
	}
	targets := []target{
		{path: pathClusterIPRemote, directNS: cliNS, directAddr: direct, serviceNS: cliNS, svcAddr: hostPort(addrs.clusterIP, 80), cgroup: node1},
		{path: pathClusterIPLocal, directNS: cliNS, directAddr: hostPort(localIP, 80), serviceNS: cliNS, svcAddr: hostPort(addrs.localClusterIP, 80), cgroup: node1},
		{path: pathNodePort, directNS: extNS, directAddr: direct, serviceNS: extNS, svcAddr: hostPort(topology.NodeAddr(1), int(addrs.nodePort))},
		{path: pathLB, directNS: extNS, directAddr: direct, serviceNS: extNS, svcAddr: hostPort(addrs.lbIP, 80)},
	}
	if err := waitTargets(ctx, targets, settleLimit); err != nil {
		t.Fatal(err)
	}
	owner, err := lbOwner(ctx, l, extNS, addrs.lbIP)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("LoadBalancer IP %s is announced by node%d", addrs.lbIP, owner)
	sc := &scaler{l: l, probeNS: []*netns.NS{cliNS, remoteNS}}
	rep := report{duration: dur, rounds: rounds, pairs: pairs}
	for ci, n := range counts {
		services, apply, programmed, err := sc.growTo(ctx, n)
		if err != nil {
			t.Fatalf("%d Services: %v", n, err)
		}
		quiet, err := waitQuiet(ctx, l.AgentPids)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d Services: fillers applied in %s, programmed on both nodes by %s after %s, agents quiet %s later",
			services, apply.Round(time.Millisecond), current, programmed.Round(time.Millisecond), quiet.Round(time.Millisecond))
		cr := countResult{services: services, apply: apply, programmed: programmed, grownBy: current}
		for _, p := range proxies {
			cr.proxies = append(cr.proxies, proxyResult{proxy: p, paths: newPathResults(targets)})
		}
		for _, sl := range slots {
			if sl.count != ci {
				continue
			}
			pr := cr.proxy(sl.proxy)
			if sl.proxy != current {
				next, _ := proxyNamed(sl.proxy)
				ready, quiet, err := swapTo(ctx, l, next, sc, targets, addrs.lbIP, extNS, owner)
				if err != nil {
					t.Fatalf("%d Services: %v", services, err)
				}
				current = next.name
				t.Logf("%d Services: swapped to %s, every path answering after %s, agents quiet %s later",
					services, sl.proxy, ready.Round(time.Millisecond), quiet.Round(time.Millisecond))
				pr.ready = append(pr.ready, ready)
			}
			// Pinned only while measuring: agents a swap starts must not
			// inherit the load generator's CPUs.
			pin, err := pinCPUs([]string{remoteNS.Path(), localNS.Path()})
			if err != nil {
				t.Fatal(err)
			}
			rep.pinning = pin.desc
			err = measureSlot(ctx, sl, targets, dur, pairs, pr.paths, t.Logf)
			if uerr := pin.unpin(); uerr != nil && err == nil {
				err = uerr
			}
			if err != nil {
				t.Fatalf("%d Services: %v", services, err)
			}
		}
		rep.counts = append(rep.counts, cr)
	}
	fmt.Print(rep.String())
	t.Log("\n" + rep.String())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	usplane "github.com/svcnet/svcnet/internal/dataplane/userspace"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// Every process the lab runs for a node runs in the node's cgroup
// (ROOT/svcnet-lab-NAME/nodeI), so the eBPF plane attached there sees its
// sockets: a pod's server and its supervisor, the node's svcnet proxy, a
// command `lab exec` runs on the node or in a pod, and the process whose
// sockets a dial from a pod uses; the client's commands do not. On the eBPF
// plane the proxy is given its node's cgroup (--cgroup), and that dial is translated at connect (its flow is addressed to
// the endpoint; on the other planes to the ClusterIP). Down removes the
// lab's cgroups.
func TestNodeCgroups(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name := labtest.Name("cg")
	l := labtest.Up(t, ctx, lab.Options{Name: name, Nodes: 2, Binary: svcnetBin, Progress: testWriter{t}}, "supervise.yaml")
	e := &env{t: t, ctx: ctx, l: l}
	root, err := cgroup.Root()
	if err != nil {
		t.Fatal(err)
	}
	labDir, err := l.Names().Cgroup(root)
	if err != nil {
		t.Fatal(err)
	}
	nodeDir := func(i int) string {
		d, err := l.Names().NodeCgroup(root, i)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// cgroupOf is pid's cgroup v2 path relative to root ("0::/PATH").
	cgroupOf := func(pid int) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				return filepath.Join(root, p)
			}
		}
		t.Fatalf("pid %d: no cgroup v2 line in %q", pid, b)
		return ""
	}
	for i := 1; i <= 2; i++ {
		want := nodeDir(i)
		pod := fmt.Sprintf("web-%d", i)
		sup, err := l.SupervisorPid("default", pod)
		if err != nil {
			t.Fatal(err)
		}
		child, err := l.SupervisedPid("default", pod)
		if err != nil || child == 0 {
			t.Fatalf("pod %s: no server (%v)", pod, err)
		}
		proxy, err := l.ProxyPid(i)
		if err != nil || proxy == 0 {
			t.Fatalf("node%d: no proxy (%v)", i, err)
		}
		for what, pid := range map[string]int{"pod " + pod + "'s supervisor": sup, "pod " + pod + "'s server": child, "node's proxy": proxy} {
			if got := cgroupOf(pid); got != want {
				t.Errorf("node%d: %s (pid %d) in cgroup %s, want %s", i, what, pid, got, want)
			}
		}
		if cg := l.Names().NodeCgroupPath(i); l.DataPlane() == cluster.DataPlaneEBPF && !slices.Contains(topology.Cmdline(proxy), cg) {
			t.Errorf("node%d: the eBPF plane's proxy %q is not given --cgroup %s", i, topology.Cmdline(proxy), cg)
		}
	}

	// lab exec: on a node and in a pod, in the node's cgroup; on the client not.
	for where, want := range map[string]string{"node1": nodeDir(1), "client-2": nodeDir(2), "client": ""} {
		out, err := l.Command(e.place(where), "cat", "/proc/self/cgroup").Output()
		if err != nil {
			t.Fatalf("exec in %s: %v", where, err)
		}
		in := strings.Contains(string(out), "0::/"+strings.TrimPrefix(want, root+"/")+"\n")
		if want == "" {
			in = !strings.Contains(string(out), filepath.Base(labDir))
		}
		if !in {
			t.Errorf("exec in %s ran in %q, want cgroup %q", where, out, want)
		}
	}

	// A dial from a pod: on a socket of a process in its node's cgroup,
	// gone when the dialer is done.
	dial, dialerDone, err := l.Dialer(e.place("client-2"))
	if err != nil {
		t.Fatal(err)
	}
	done := sync.OnceFunc(dialerDone)
	t.Cleanup(done)
	web := e.service("web")
	url := clusterURL(web, 80)
	var reply echo.Reply
	e.eventually("GET web from client-2", func() error {
		// Bounded per attempt: a SYN sent before the proxies program the
		// Service is lost, and its connect would wait minutes.
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		reply, err = echo.Get(actx, dial, url)
		if err == nil && !strings.HasPrefix(reply.Pod, "web-") {
			err = fmt.Errorf("answered by %q", reply.Pod)
		}
		return err
	})
	// The flow the endpoint answered, on the pod's node: addressed to the
	// ClusterIP and DNATed by the rules; on the eBPF plane, connected to
	// the endpoint from the start (the socket is in the node's cgroup); on
	// the userspace plane, the proxy's own connection from the node, also
	// addressed to the endpoint (the pod's own leg ends at the proxy port).
	flow := connFlow(t, l.Names().Node(2), reply.Client)
	direct := l.DataPlane() == cluster.DataPlaneEBPF || l.DataPlane() == usplane.Name
	if toService := flow.OrigDst.Addr().String() == web.Spec.ClusterIP; toService == direct {
		t.Errorf("data plane %q: the GET from client-2 was the flow %s", l.DataPlane(), flow)
	}
	pids, err := cgroup.Pids(nodeDir(2))
	if err != nil {
		t.Fatal(err)
	}
	source := slices.IndexFunc(pids, func(p int) bool {
		return slices.Equal(topology.Cmdline(p), []string{svcnetBin, "lab", "sockets"})
	})
	done()
	if source < 0 {
		t.Fatalf("no socket source in %s while a dialer from client-2 was open (pids %v)", nodeDir(2), pids)
	}
	if !topology.WaitGone([]int{pids[source]}, 5*time.Second) {
		t.Errorf("socket source %d still runs after the dialer is done", pids[source])
	}

	l.Close()
	if err := lab.Down(name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(labDir); !os.IsNotExist(err) {
		t.Errorf("%s left after lab down (stat: %v)", labDir, err)
	}
}

// connFlow returns the conntrack flow in namespace nsName whose original
// source is client (HOST:PORT).
func connFlow(t *testing.T, nsName, client string) conntrack.Flow {
	t.Helper()
	src, err := netip.ParseAddrPort(client)
	if err != nil {
		t.Fatalf("client %q: %v", client, err)
	}
	ns, err := netns.Open(nsName)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	ct, err := conntrack.NewNetlinkIn(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	flows, err := ct.List(ipfamily.IPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range flows {
		if f.OrigSrc == src {
			return f
		}
	}
	t.Fatalf("no conntrack flow from %s in %s", client, nsName)
	return conntrack.Flow{}
}

package trace_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/dataplane"
	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/servicetable"
	"github.com/svcnet/svcnet/internal/trace"
)

// noRules stands for the nftables rules under the ebpf plane: the kernel
// test programs only the socket load balancer.
type noRules struct{}

func (noRules) Name() string                          { return "none" }
func (noRules) Probe(context.Context) error           { return nil }
func (noRules) Changed(context.Context) (bool, error) { return false, nil }
func (noRules) Cleanup(context.Context) error         { return nil }
func (noRules) Sync(context.Context, *servicetable.Table, bool) (dataplane.Stats, error) {
	return dataplane.Stats{}, nil
}

// TestVerifySocketKernel: what the tracer explains for connects on node1
// agrees with the maps the ebpf plane programs for node1's table into a
// real socket load balancer (attached to a throwaway child cgroup), read
// back through the cgroup as --verify reads them; a map that no longer
// says what the trace says is a difference, and so is a cgroup with no
// socket load balancer.
func TestVerifySocketKernel(t *testing.T) {
	cg := cgrouptest.New(t)
	snap := loadScenario(t)
	nd := scenarioNetwork(snap).Node("node1")
	lb := loadNode(t, cg, snap, nd)
	maps := trace.KernelSocketMaps(func(node string) (string, error) {
		if node != "node1" {
			t.Errorf("maps of %s opened, want the sender's node1", node)
		}
		return cg, nil
	})
	check := func(t *testing.T, tr *trace.Trace, want string) {
		t.Helper()
		diffs, checked, err := trace.CheckSocket(tr, maps)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && (len(diffs) > 0 || checked == ""):
			t.Errorf("differences %q (checked %q), want none", diffs, checked)
		case want != "" && (len(diffs) != 1 || !strings.Contains(diffs[0], want)):
			t.Errorf("differences %q, want one saying %q", diffs, want)
		}
	}
	rows := map[string]*trace.Trace{}
	for _, row := range []string{
		"ClusterIP from a pod to an endpoint on its node",            // held
		"ClusterIP from a node (host network) to an endpoint on it",  // held, from the node
		"NodePort (Local) from a pod short-circuits to any endpoint", // a NodePort on node1's address
		"no endpoints: TCP is reset",                                 // held, no backends
		"no endpoints: UDP gets ICMP port unreachable",               // held, no backends, UDP
		"sessionAffinity ClientIP records the client",                // held, with affinity
		"internalTrafficPolicy Local without a local endpoint drops", // left: policy drop
	} {
		tr := runScenario(t, snap, ebpfScenario(scenarioByName(t, row)))
		if tr.Socket == nil || tr.Socket.Node != "node1" {
			t.Fatalf("%s: socket load balancer decision %+v, want node1's", row, tr.Socket)
		}
		rows[row] = tr
		t.Run(row, func(t *testing.T) { check(t, tr, "") })
	}

	web := rows["ClusterIP from a pod to an endpoint on its node"].Socket
	if err := lb.SetService(web.Frontend, model.ProtocolTCP, web.Backends[1:]); err != nil {
		t.Fatal(err)
	}
	t.Run("a backend gone from the map", func(t *testing.T) {
		check(t, rows["ClusterIP from a pod to an endpoint on its node"], "has backends ["+web.Backends[1].String()+"], but the trace has it translate it to one of")
	})
	dropped := rows["internalTrafficPolicy Local without a local endpoint drops"].Socket
	if err := lb.SetService(dropped.Frontend, model.ProtocolTCP, []netip.AddrPort{web.Backends[0]}); err != nil {
		t.Fatal(err)
	}
	t.Run("a frontend left to the rules is in the map", func(t *testing.T) {
		check(t, rows["internalTrafficPolicy Local without a local endpoint drops"], "but the trace leaves it to the nftables rules")
	})
	empty := rows["no endpoints: TCP is reset"].Socket
	if err := lb.DeleteService(empty.Frontend, model.ProtocolTCP); err != nil {
		t.Fatal(err)
	}
	t.Run("a refused frontend gone from the map", func(t *testing.T) {
		check(t, rows["no endpoints: TCP is reset"], "has no services map entry for "+empty.Frontend.String()+"/tcp")
	})
	t.Run("no socket load balancer attached", func(t *testing.T) {
		other := cgrouptest.New(t)
		diffs, _, err := trace.CheckSocket(rows["ClusterIP from a pod to an endpoint on its node"], trace.KernelSocketMaps(func(string) (string, error) { return other, nil }))
		if err != nil || len(diffs) != 1 || !strings.Contains(diffs[0], "no socket load balancer attached") {
			t.Errorf("differences %q, error %v; want one saying none is attached", diffs, err)
		}
	})
}

// TestVerifyRefusedKernel: --verify of a connect the socket load balancer
// refuses, end to end: the sender's namespace is known, node1's socket load
// balancer is found by its cgroup path, its map entry (no backends) agrees
// with the trace and no probe is sent, for no packet would be; once the
// entry is gone the report differs. No packet leaves the namespace.
func TestVerifyRefusedKernel(t *testing.T) {
	cg := cgrouptest.New(t)
	sender := netnstest.New(t, "trace")
	snap := loadScenario(t)
	net := scenarioNetwork(snap)
	nd := net.Node("node1")
	root, err := cgroup.Root()
	if err != nil {
		t.Fatal(err)
	}
	path, err := cgroup.Path(root, cg)
	if err != nil {
		t.Fatal(err)
	}
	net.NetNS = map[string]string{"default/client-1": sender.Name()}
	net.Cgroups = map[string]string{"node1": path}
	lb := loadNode(t, cg, snap, nd)
	ask := trace.Ask{From: "default/client-1:40000", To: "default/empty"}
	opts := trace.Options{Rules: trace.RulesRendered, DataPlane: ebpfplane.Name}

	rep, err := trace.Verify(context.Background(), snap, net, ask, opts)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || !strings.HasPrefix(rep.Probe, "not sent") || !strings.Contains(rep.Socket, "has backends [], as traced") ||
		!rep.Trace.Socket.Refused() || len(rep.Checks) != 0 || !strings.Contains(b.String(), "verify: the socket load balancer's maps agree with the trace") {
		t.Errorf("report: ok %v, probe %q, socket %q, %d node checks; want it to agree, unprobed, checked in the map:\n%s", rep.OK(), rep.Probe, rep.Socket, len(rep.Checks), b.String())
	}

	if err := lb.DeleteService(rep.Trace.Socket.Frontend, model.ProtocolTCP); err != nil {
		t.Fatal(err)
	}
	rep, err = trace.Verify(context.Background(), snap, net, ask, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Differences) != 1 || !strings.Contains(rep.Differences[0], "has no services map entry for 10.96.0.70:80/tcp, but the trace has it refuse the connect") {
		t.Errorf("with the entry gone: differences %q, want the missing entry", rep.Differences)
	}
}

// TestNodeCgroupFromProxyKernel: without a cgroup path given, --verify
// reads it from the command line of the svcnet proxy --data-plane ebpf that
// runs in the node's network namespace, ignoring a proxy of another plane
// there. The proxies are stand-ins (the test binary, named svcnet, waiting)
// in a throwaway namespace.
func TestNodeCgroupFromProxyKernel(t *testing.T) {
	ns := netnstest.New(t, "trace")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	svcnet := filepath.Join(t.TempDir(), "svcnet")
	if err := os.Symlink(bin, svcnet); err != nil {
		t.Fatal(err)
	}
	for _, plane := range []string{"nftables", ebpfplane.Name} {
		cmd := netns.CommandNetIn(context.Background(), ns.Name(), svcnet, "proxy", "--data-plane", plane, "--cgroup", "/svcnet-test/"+plane)
		cmd.Env = append(os.Environ(), standInEnv+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	net := &trace.Network{NetNS: map[string]string{"node1": ns.Name()}}
	root, err := cgroup.Root()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "/svcnet-test/"+ebpfplane.Name)
	var got string
	// nsenter execs the stand-in once it has entered the namespace.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got, err = trace.NodeCgroup(net, "node1"); err == nil {
			break
		}
	}
	if err != nil || got != want {
		t.Errorf("NodeCgroup = %q, %v; want %q", got, err, want)
	}
	if _, err := trace.NodeCgroup(&trace.Network{NetNS: map[string]string{"node1": netnstest.New(t, "trace").Name()}}, "node1"); err == nil || !strings.Contains(err.Error(), "no svcnet proxy --data-plane ebpf runs") {
		t.Errorf("a namespace without a proxy: %v, want an error saying so", err)
	}
}

// loadNode loads node nd's service table of snap into a real socket load
// balancer (the eBPF plane without rules) attached to cgroup cg, closed when
// the test ends, and returns it.
func loadNode(t *testing.T, cg string, snap *model.Snapshot, nd *trace.NodeNet) *socklb.LB {
	t.Helper()
	var lb *socklb.LB
	plane := ebpfplane.New(noRules{}, func() (ebpfplane.SocketLB, error) {
		var err error
		lb, err = socklb.Open(cg)
		return lb, err
	}, nil)
	t.Cleanup(func() {
		if err := plane.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	table := servicetable.Build(snap, servicetable.NodeConfig{NodeName: nd.Name, Zone: nd.Zone, NodePortAddresses: nd.Addrs})
	if _, err := plane.Sync(context.Background(), table, true); err != nil {
		t.Fatalf("sync %s's table: %v", nd.Name, err)
	}
	return lb
}

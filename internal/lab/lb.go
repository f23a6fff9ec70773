package lab

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"


	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// The lab's LoadBalancer pool: the IP plan's 172.26.236.180-199 on the node
// network, announced by the nodes' speakers (svcnet proxy --announce l2).
const (
	PoolName  = "lab"
	PoolRange = "172.26.236.180-172.26.236.199"
)

// defaultPool is the IPAddressPool every lab starts with.
func defaultPool() *pool.IPAddressPool {
	auto := true
	return &pool.IPAddressPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: pool.SchemeGroupVersion.String(), Kind: pool.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: PoolName},
		Spec:       pool.IPAddressPoolSpec{Addresses: []string{PoolRange}, AutoAssign: &auto, Mode: "l2"},
	}
}

// applyDefaultPool creates the lab's pool through the lab's control plane.
func (l *Lab) applyDefaultPool(ctx context.Context) error {
	if errs := l.cluster.Apply(ctx, []controlplane.Object{{Origin: "lab up", Obj: defaultPool()}}); len(errs) > 0 {
		return fmt.Errorf("lab %s: address pool %s: %v", l.names.Lab, PoolName, errs)
	}
	return nil
}

// ProxyPid returns the pid of node i's svcnet proxy (beside kube-proxy: the
// one that runs the pod routes and the speaker), or 0 when none runs.
func (l *Lab) ProxyPid(i int) (int, error) {
	pids, err := l.agentPids(i)
	if err != nil {
		return 0, err
	}
	for _, p := range pids {
		if agentKind(topology.Cmdline(p), topology.NodeName(i)) == ProxySvcnet {
			return p, nil
		}
	}
	return 0, nil
}

// KillProxy sends sig to node i's svcnet proxy and waits (up to 5 s) until it is
// gone. The node's kernel state (nftables, routes) stays, as after a crash;
// its supervisor starts it again (see Supervise).
func (l *Lab) KillProxy(i int, sig syscall.Signal) error {
	pid, err := l.ProxyPid(i)
	if err != nil || pid == 0 {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("node %s: kill proxy %d: %w", topology.NodeName(i), pid, err)
	}
	if !topology.WaitGone([]int{pid}, 5*time.Second) {
		return fmt.Errorf("node %s: proxy %d still running 5s after signal %v", topology.NodeName(i), pid, sig)
	}
	return nil
}

// StartProxy waits until node i's svcnet proxy runs and has synced, starting
// it (supervised) when no supervisor of it runs: its supervisor restarts it
// after a kill, but not after the supervisor itself was killed. Beside
// kube-proxy that is the one of the pod routes and speaker.
func (l *Lab) StartProxy(ctx context.Context, i int) error {
	if i < 1 || i > l.info.Nodes {
		return fmt.Errorf("lab %s: no node %d", l.names.Lab, i)
	}
	sv := l.agents(i)[0]
	pod := nodeAgentPod(i, sv)
	if sup, err := l.SupervisorPid(pod.Namespace, pod.Name); err == nil {
		return l.waitAgent(ctx, i, sv, newChildWatch(sup, sv.log).fromNow())
	}
	pid, err := l.ProxyPid(i)
	if err != nil {
		return err
	}
	if pid != 0 { // left running by a killed supervisor
		if err := topology.StopPids([]int{pid}, agentStopGrace); err != nil {
			return fmt.Errorf("node %s: stop the unsupervised proxy: %w", topology.NodeName(i), err)
		}
	}
	pids, err := l.startAgents(ctx, i, []agent{sv})
	if err != nil {
		return err
	}
	if err := l.waitAgent(ctx, i, sv, newChildWatch(pids[0], sv.log)); err != nil {
		return err
	}
	return l.agentRunning(ctx, pod, topology.NodeAddr(i))
}

// Announcer returns the node (1-based) whose MAC address the external client's
// neighbour table holds for ip: the node that answered its ARP request or whose
// gratuitous ARP it took last. Send traffic to ip first.
func (l *Lab) Announcer(ip netip.Addr) (int, error) {
	mac, err := topology.ClientNeighbour(l.names, ip)
	if err != nil {
		return 0, err
	}
	for i := 1; i <= l.info.Nodes; i++ {
		m, err := topology.LinkMAC(l.names.Node(i), "eth0")
		if err != nil {
			return 0, err
		}
		if bytes.Equal(m, mac) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("client: %s is at %s, which is no node's eth0", ip, mac)
}

// InPool reports whether ip is in the lab's pool, PoolRange.
func InPool(ip netip.Addr) bool { return poolRange.Contains(ip) }

var poolRange = func() alloc.Range {
	r, err := pool.ParseRange(PoolRange)
	if err != nil {
		panic(err)
	}
	return r
}()

// SetNodeLink connects node i to the node network or cuts it off (see
// topology.SetNodeLink).
func (l *Lab) SetNodeLink(i int, up bool) error { return topology.SetNodeLink(l.names, i, up) }

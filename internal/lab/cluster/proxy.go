package cluster

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// ProxyPid returns the pid of node i's svcnet proxy (beside kube-proxy: the
// one that runs the pod routes and the speaker), or 0 when none runs.
func (c *Cluster) ProxyPid(i int) (int, error) {
	pids, err := c.agentPids(i)
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
func (c *Cluster) KillProxy(i int, sig syscall.Signal) error {
	pid, err := c.ProxyPid(i)
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
func (c *Cluster) StartProxy(ctx context.Context, i int) error {
	if i < 1 || i > c.Info.Nodes {
		return fmt.Errorf("lab %s: no node %d", c.Names.Lab, i)
	}
	sv := c.agents(i)[0]
	pod := nodeAgentPod(i, sv)
	if sup, err := c.SupervisorPid(pod.Namespace, pod.Name); err == nil {
		return c.waitAgent(ctx, i, sv, NewChildWatch(sup, sv.log).fromNow())
	}
	pid, err := c.ProxyPid(i)
	if err != nil {
		return err
	}
	if pid != 0 { // left running by a killed supervisor
		if err := topology.StopPids([]int{pid}, agentStopGrace); err != nil {
			return fmt.Errorf("node %s: stop the unsupervised proxy: %w", topology.NodeName(i), err)
		}
	}
	pids, err := c.startAgents(ctx, i, []agent{sv})
	if err != nil {
		return err
	}
	if err := c.waitAgent(ctx, i, sv, NewChildWatch(pids[0], sv.log)); err != nil {
		return err
	}
	return c.AgentRunning(ctx, pod, c.Info.Stack().NodeAddr(i))
}

package lab

import (
	"context"
	"syscall"
)

// The processes the lab runs on its nodes (see package cluster): every
// node's Service proxy, each under its supervisor.

// Proxy returns the nodes' Service proxy (one of cluster.Proxies).
func (l *Lab) Proxy() string { return l.c.Proxy() }

// SetProxy replaces every node's Service proxy by proxy, keeping everything
// else (see cluster.Cluster.SetProxy).
func (l *Lab) SetProxy(ctx context.Context, proxy string) error { return l.c.SetProxy(ctx, proxy) }

// ProxyPid returns the pid of node i's svcnet proxy, or 0 when none runs.
func (l *Lab) ProxyPid(i int) (int, error) { return l.c.ProxyPid(i) }

// KillProxy sends sig to node i's svcnet proxy and waits until it is gone;
// its supervisor starts it again (see cluster.Cluster.KillProxy).
func (l *Lab) KillProxy(i int, sig syscall.Signal) error { return l.c.KillProxy(i, sig) }

// StartProxy waits until node i's svcnet proxy runs and has synced, starting
// it when no supervisor of it runs (see cluster.Cluster.StartProxy).
func (l *Lab) StartProxy(ctx context.Context, i int) error { return l.c.StartProxy(ctx, i) }

// ProxyLog is the log file of node i's svcnet proxy.
func (l *Lab) ProxyLog(i int) string { return l.c.ProxyLog(i) }

// AgentPids returns the pids of every node's agents (svcnet proxy and,
// beside it, kube-proxy).
func (l *Lab) AgentPids() ([]int, error) { return l.c.AgentPids() }

// SupervisorPid returns the pid of the supervisor of Pod namespace/name.
func (l *Lab) SupervisorPid(namespace, name string) (int, error) {
	return l.c.SupervisorPid(namespace, name)
}

// SupervisedPid returns the pid of the process the lab runs as Pod
// namespace/name's containers, or 0 while its supervisor waits to restart
// it (see cluster.Cluster.SupervisedPid).
func (l *Lab) SupervisedPid(namespace, name string) (int, error) {
	return l.c.SupervisedPid(namespace, name)
}

// DataPlane returns every node's svcnet proxy's --data-plane ("" for the
// proxy's default; see Options.DataPlane).
func (l *Lab) DataPlane() string { return l.c.Info.DataPlane }

// SetProxyPlane replaces every node's Service proxy by proxy and svcnet
// proxy's data plane by dataPlane, keeping everything else (see
// cluster.Cluster.SetProxyPlane).
func (l *Lab) SetProxyPlane(ctx context.Context, proxy, dataPlane string) error {
	return l.c.SetProxyPlane(ctx, proxy, dataPlane)
}

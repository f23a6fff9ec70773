package lab

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// Place is where a lab command runs: the client, a node, or a pod.
type Place struct {
	// NS is the namespace's name; Pod is set for a pod.
	NS  string
	Pod *corev1.Pod
	// Node is the index of the node (of the pod), whose cgroup a command
	// and a dial from the place run in; 0 for the client.
	Node int
}

// Resolve finds "client", "nodeN", or a pod ("NAME" in default, or "NS/NAME").
func (l *Lab) Resolve(ctx context.Context, where string) (Place, error) {
	switch {
	case where == "client":
		return Place{NS: l.c.Names.Client()}, nil
	case topology.NodeIndex(where) > 0:
		i := topology.NodeIndex(where)
		if i > l.c.Info.Nodes {
			return Place{}, fmt.Errorf("%s: not in this lab (node1..node%d)", where, l.c.Info.Nodes)
		}
		return Place{NS: l.c.Names.Node(i), Node: i}, nil
	}
	ns, name := "default", where
	if i := strings.IndexByte(where, '/'); i >= 0 {
		ns, name = where[:i], where[i+1:]
	}
	if err := controlplane.ValidateName("Pod", ns, name); err != nil {
		return Place{}, fmt.Errorf("%q: not a place: want client, node1..node%d, or a pod (NAME or NAMESPACE/NAME): %w", where, l.c.Info.Nodes, err)
	}
	p, err := l.c.CP.Pod(ctx, ns, name)
	if err != nil {
		return Place{}, err
	}
	if p == nil || !netns.Exists(l.c.Names.Pod(ns, name)) {
		return Place{}, fmt.Errorf("%q: no such place: want client, node1..node%d, or a running pod (NAME or NAMESPACE/NAME)", where, l.c.Info.Nodes)
	}
	return Place{NS: l.c.Names.Pod(ns, name), Pod: p, Node: topology.NodeIndex(p.Spec.NodeName)}, nil
}

// Command returns argv run in the place, as `ip netns exec` runs it; in a pod it
// also gets the pod's host name (and, through ip netns exec, its /etc files).
// From a node or a pod it starts in the node's cgroup (a command whose
// cgroup cannot be opened fails to start, with that error).
func (l *Lab) Command(p Place, argv ...string) *exec.Cmd {
	return l.CommandContext(context.Background(), p, argv...)
}

// CommandContext is Command, killed when ctx ends.
func (l *Lab) CommandContext(ctx context.Context, p Place, argv ...string) *exec.Cmd {
	if p.Pod != nil {
		argv = topology.PodCommand(topology.PodHostname(p.Pod), argv...)
	}
	cmd := netns.CommandIn(ctx, p.NS, argv...)
	if p.Node > 0 {
		if err := l.inNodeCgroup(cmd, p.Node); err != nil {
			cmd.Err = err
		}
	}
	return cmd
}

// inNodeCgroup makes cmd start in node i's cgroup. The directory stays open
// for cmd.Start until cmd is garbage collected.
func (l *Lab) inNodeCgroup(cmd *exec.Cmd, i int) error {
	dir, err := l.c.NodeCgroup(i)
	if err != nil {
		return err
	}
	cg, err := cgroup.Open(dir)
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	runtime.AddCleanup(cmd, func(f *os.File) { f.Close() }, cg)
	return nil
}

// Dialer returns a dial function whose connections start in the place: from
// a node or a pod, on sockets of a process in the node's cgroup (see
// sockets.go). A host name in the address is resolved as the place resolves
// it, from inside the place (see resolver.go); a name it cannot resolve is a
// *ResolveError. done releases the place's namespace and ends that process.
func (l *Lab) Dialer(p Place) (dial func(ctx context.Context, network, addr string) (net.Conn, error), done func(), err error) {
	return l.dialer(p, nil)
}

// dialer is Dialer, telling seen (when not nil) each address it dials once
// a name is resolved.
func (l *Lab) dialer(p Place, seen func(addr string)) (dial dialFunc, done func(), err error) {
	ns, err := netns.Open(p.NS)
	if err != nil {
		return nil, nil, err
	}
	observed := func(in dialFunc) dialFunc {
		if seen == nil {
			return in
		}
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			seen(addr)
			return in(ctx, network, addr)
		}
	}
	if p.Node == 0 {
		in := netns.Dialer(ns)
		return resolvingDial(l.resolverOf(p, in), observed(in)), func() { ns.Close() }, nil
	}
	dir, err := l.c.NodeCgroup(p.Node)
	if err != nil {
		ns.Close()
		return nil, nil, err
	}
	src, err := startSocketSource(l.c.Info.Binary, p.NS, dir, p.NS)
	if err != nil {
		ns.Close()
		return nil, nil, err
	}
	in := netns.DialerControl(ns, src.control)
	return resolvingDial(l.resolverOf(p, in), observed(in)), func() { src.close(); ns.Close() }, nil
}

// TargetURL turns a curl target into a URL: a URL as is (http://, or
// udp://HOST:PORT for the echo servers' UDP ports); HOST or HOST:PORT as
// http://HOST:PORT/; svc/NAME[:PORT] (or NS/svc/NAME) as the Service's first
// ClusterIP on its first (or the given) port.
func (l *Lab) TargetURL(ctx context.Context, target string) (string, error) {
	if strings.Contains(target, "://") {
		u, err := url.Parse(target)
		if err != nil {
			return "", fmt.Errorf("target %q: %w", target, err)
		}
		if u.Scheme == "udp" && u.Port() == "" {
			return "", fmt.Errorf("target %q: a udp:// target needs its port (udp://HOST:PORT)", target)
		}
		return target, nil
	}
	ns, rest := "default", target
	if i := strings.Index(target, "/svc/"); i > 0 {
		ns, rest = target[:i], target[i+1:]
	}
	if name, ok := strings.CutPrefix(rest, "svc/"); ok {
		port := ""
		if i := strings.IndexByte(name, ':'); i >= 0 {
			name, port = name[:i], name[i+1:]
		}
		r, err := l.c.CP.Result(ctx, "Service")
		if err != nil {
			return "", err
		}
		for _, s := range r.Services {
			if s.Namespace != ns || s.Name != name {
				continue
			}
			if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
				return "", fmt.Errorf("target %q: Service %s/%s has no ClusterIP and port", target, ns, name)
			}
			if port == "" {
				port = strconv.Itoa(int(s.Spec.Ports[0].Port))
			}
			return "http://" + net.JoinHostPort(s.Spec.ClusterIP, port) + "/", nil
		}
		return "", fmt.Errorf("target %q: Service %s/%s: %w", target, ns, name, cluster.ErrNotFound)
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		host, port = target, "80"
	}
	return "http://" + net.JoinHostPort(host, port) + "/", nil
}

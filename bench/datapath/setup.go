package datapathbench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/netns"
)

// Paths, in the order they are measured and reported.
const (
	pathClusterIPRemote = "clusterip-remote"
	pathClusterIPLocal  = "clusterip-local"
	pathNodePort        = "nodeport"
	pathLB              = "loadbalancer"
)

// allPaths are the paths, in order.
var allPaths = []string{pathClusterIPRemote, pathClusterIPLocal, pathNodePort, pathLB}

// target is one path's two ends: the direct reference and the Service, each a
// namespace to start in and a host:port.
type target struct {
	path                string
	directNS, serviceNS *netns.NS
	directAddr, svcAddr string
	// cgroup, when set, is the cgroup directory the load generator (this
	// process) joins for the pair, both sides alike: node1's for the pod
	// paths, so that the eBPF plane's socket load balancer sees its
	// connects as a pod's on node1 (cgroup.Enter).
	cgroup string
}

// parseCounts parses SVCNET_BENCH_COUNTS: positive Service counts separated by
// commas, returned ascending without duplicates.
func parseCounts(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxServices {
			return nil, fmt.Errorf("service count %q: want a number from 1 to %d", f, maxServices)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// maxServices bounds the counts (fillerAddr has room for 32767 fillers).
const maxServices = 20000

// serviceAddrs are what the control plane allocated for target and
// target-local.
type serviceAddrs struct {
	clusterIP, localClusterIP, lbIP netip.Addr
	nodePort                        int32
}

// waitServices waits (bounded by 30s) until target has its ClusterIP, node
// port and LoadBalancer IP, and target-local its ClusterIP.
func waitServices(ctx context.Context, l *lab.Lab) (serviceAddrs, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var a serviceAddrs
		r, err := l.Get(ctx)
		if err != nil {
			return a, err
		}
		for _, s := range r.Services {
			if s.Namespace != "default" {
				continue
			}
			switch s.Name {
			case "target":
				a.clusterIP, _ = netip.ParseAddr(s.Spec.ClusterIP)
				if len(s.Spec.Ports) > 0 {
					a.nodePort = s.Spec.Ports[0].NodePort
				}
				if len(s.Status.LoadBalancer.Ingress) > 0 {
					a.lbIP, _ = netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
				}
			case "target-local":
				a.localClusterIP, _ = netip.ParseAddr(s.Spec.ClusterIP)
			}
		}
		if a.clusterIP.IsValid() && a.localClusterIP.IsValid() && a.lbIP.IsValid() && a.nodePort != 0 {
			return a, nil
		}
		if time.Now().After(deadline) {
			return a, fmt.Errorf("services target and target-local: addresses not all allocated after 30s: %+v", a)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return a, err
		}
	}
}

// serviceCount returns the number of Services the control plane holds.
func serviceCount(ctx context.Context, l *lab.Lab) (int, error) {
	r, err := l.Get(ctx)
	if err != nil {
		return 0, err
	}
	return len(r.Services), nil
}

// podIP returns the pod's IPv4 address.
func podIP(p *corev1.Pod) (netip.Addr, error) {
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is4() {
			return a, nil
		}
	}
	if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("pod %s/%s: no IPv4 address in its status", p.Namespace, p.Name)
}

// get makes one GET on a new connection from inside ns to addr.
func get(ctx context.Context, ns *netns.NS, addr string) error {
	return ns.Do(func() error {
		d := net.Dialer{Timeout: requestTimeout}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(requestTimeout))
		return roundTrip(c, bufio.NewReader(c), []byte("GET / HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n"))
	})
}

// waitAnswer waits until a GET from ns to addr succeeds, bounded by limit.
func waitAnswer(ctx context.Context, ns *netns.NS, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := get(ctx, ns, addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s from %s: no answer within %s: %w", addr, ns.Name(), limit, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

func hostPort(a netip.Addr, port int) string { return net.JoinHostPort(a.String(), strconv.Itoa(port)) }

// hostSysctls reads the host's values of clientSysctls, to check that the
// benchmark left them alone.
func hostSysctls() (string, error) {
	var out []string
	for _, s := range clientSysctls {
		b, err := os.ReadFile(s.path)
		if err != nil {
			return "", err
		}
		out = append(out, s.path+"="+strings.TrimSpace(string(b)))
	}
	return strings.Join(out, " "), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

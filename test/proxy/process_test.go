package proxy_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/logtest"
	proc "github.com/svcnet/svcnet/internal/process"
	"github.com/svcnet/svcnet/internal/testbin"
)

// proxyProc is one run of `svcnet proxy` in the node namespace.
type proxyProc struct {
	args []string
	log  *logtest.Buffer
	*proc.Process
}

// proxyArgs are the flags every test's proxy gets (the documented command line,
// dual-stack, on the data plane $SVCNET_DATA_PLANE names). Extra flags may be
// appended; later ones win.
func (c *cluster) proxyArgs() []string {
	return c.proxyArgsFrom("--state", c.dir)
}

// proxyArgsFrom is proxyArgs with another source of state (e.g.
// "--kubeconfig", path).
func (c *cluster) proxyArgsFrom(sourceFlag, source string) []string {
	return append([]string{
		"proxy",
		sourceFlag, source,
		"--hostname-override", nodeName,
		"--cluster-cidr", clusterCIDR,
		"--service-cluster-ip-range", serviceCIDR,
		"--healthz-bind-address", "127.0.0.1:10256",
		"--metrics-bind-address", "127.0.0.1:10249",
		"--min-sync-period", "0",
		"-v", "2",
	}, c.planeArgs()...)
}

// planeArgs are the flags of the data plane under test: --data-plane, and
// for the eBPF plane the test's cgroup and BPF filesystem.
func (c *cluster) planeArgs() []string {
	args := testbin.DataPlaneArgs()
	if c.cgroup != "" {
		args = append(args, "--cgroup", c.cgroup, "--bpf-pin-dir", c.bpfPins)
	}
	return args
}

// startProxy starts the proxy in the node namespace with proxyArgs plus
// extra, and waits until its first sync is complete. The process is killed
// at test cleanup if still running; its log is shown if the test fails.
func (c *cluster) startProxy(extra ...string) *proxyProc {
	c.t.Helper()
	p := c.spawn(append(c.proxyArgs(), extra...)...)
	p.waitLog(c.t, 15*time.Second, 0, reSyncComplete)
	return p
}

// spawn starts svcnet with args in the node namespace, without waiting.
func (c *cluster) spawn(args ...string) *proxyProc {
	t := c.t
	t.Helper()
	p := &proxyProc{args: args, log: &logtest.Buffer{}}
	// `ip netns exec` execs svcnet in place: the PID is svcnet's own.
	cmd := c.node.Command(append([]string{svcnetBin}, args...)...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	pr, err := proc.Start(cmd)
	if err != nil {
		t.Fatalf("start svcnet %s: %v", strings.Join(args, " "), err)
	}
	p.Process = pr
	c.mu.Lock()
	c.proxies = append(c.proxies, p)
	first := !c.dumping
	c.dumping = true
	c.mu.Unlock()
	if first {
		// Registered here, after the pods of a typical test, so it runs
		// while they still exist (cleanups run last-in first-out).
		t.Cleanup(func() {
			if t.Failed() {
				c.dumpState()
			}
		})
	}
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proxyProc) describe() string {
	state := "running"
	select {
	case <-p.Done():
		state = fmt.Sprintf("exited: %v", p.Err())
	default:
	}
	return fmt.Sprintf("pid %d, %s", p.Pid(), state)
}

// running reports whether the process has not exited.
func (p *proxyProc) running() bool {
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}

// stop sends sig and waits up to 10s for the exit (then SIGKILL); it returns
// the process's exit error (nil for exit status 0).
func (p *proxyProc) stop(t testing.TB, sig syscall.Signal) error {
	t.Helper()
	_ = p.Signal(sig)
	select {
	case <-p.Done():
		return p.Err()
	case <-time.After(10 * time.Second):
		p.kill()
		t.Fatalf("svcnet proxy did not exit within 10s of %v", sig)
		return nil
	}
}

// kill SIGKILLs the process if it still runs and waits for it (bounded).
func (p *proxyProc) kill() {
	if !p.running() {
		return
	}
	_ = p.Kill(10 * time.Second)
}

// Log lines the tests wait for (klog text format, key=value pairs).
var (
	reSyncComplete = regexp.MustCompile(`"SyncProxyRules complete".*`)
	// reFullSyncComplete is a full sync's completion.
	reFullSyncComplete = regexp.MustCompile(`"SyncProxyRules complete".* full=true`)
	reLoaded           = regexp.MustCompile(`"Loaded manifests"`)
	reOps              = regexp.MustCompile(`\bops=(\d+)`)
)

// lines returns the log's lines.
func (p *proxyProc) lines() []string {
	return strings.Split(p.log.String(), "\n")
}

// waitLog waits until a log line at index >= from matches re and returns
// that line's index.
func (p *proxyProc) waitLog(t testing.TB, timeout time.Duration, from int, re *regexp.Regexp) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ls := p.lines()
		for i := from; i < len(ls); i++ {
			if re.MatchString(ls[i]) {
				return i
			}
		}
		if !p.running() {
			t.Fatalf("svcnet proxy exited (%v) before logging %q; log:\n%s", p.Err(), re, tail(p.log.String(), 60))
		}
		if time.Now().After(deadline) {
			t.Fatalf("svcnet proxy did not log %q within %v; log:\n%s", re, timeout, tail(p.log.String(), 60))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mark is the number of log lines so far, for waitLog's from.
func (p *proxyProc) mark() int { return len(p.lines()) - 1 }

// waitReload waits, after a manifest write at log mark m, until the proxy
// has reloaded the manifests and finished a sync after that. The source logs
// "Loaded manifests" after updating the store, so the sync it causes may be
// logged before or after that line; any sync logged after m counts (the
// periodic sync is 30s apart, so a sync between m and the reload is rare).
func (p *proxyProc) waitReload(t testing.TB, m int) {
	t.Helper()
	p.waitLog(t, 10*time.Second, m, reLoaded)
	p.waitLog(t, 10*time.Second, m, reSyncComplete)
}

// opsOf returns the ops= value of a "SyncProxyRules complete" line.
func opsOf(t testing.TB, line string) int {
	t.Helper()
	m := reOps.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no ops= in %q", line)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

package syncbench

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/svcnet/svcnet/internal/netns"
)

// Tool says how to run one proxy under test.
type Tool struct {
	Name string
	// Short names its namespaces and change Services.
	Short string
	// Frontends says where its Service frontends are in nf_tables (family
	// ip): the change monitor watches them, the full sync is checked by their
	// count.
	Frontends Frontends
	// MinSyncPeriod is the tool's --min-sync-period (its default): changes are
	// spaced by it plus 200ms.
	MinSyncPeriod time.Duration
	// Argv returns the command line, given the kubeconfig path.
	Argv func(kubeconfig string) []string
	// Sockets: the tool is svcnet's eBPF plane. Its run makes a child cgroup
	// for it (--cgroup), and a change counts as programmed once its frontend
	// is in the socket load balancer's services map too (SocketWait).
	Sockets bool
	// Files: the tool reads a manifest, not the API server (Argv is given
	// its path; see SvcnetFile). A change is the manifest written again
	// with one more Service (created in the API server first, for its
	// ClusterIP), and its latency runs from the manifest's rename.
	Files bool
	// Warm, for a file tool, is a command run to completion (given the
	// manifest's path as its last argument) before the tool starts.
	Warm []string
}

// ServiceIPsMap is the verdict map both proxies keep ClusterIPs in.
const ServiceIPsMap = "service-ips"

// Bench is the shared setup of every run.
type Bench struct {
	// Client creates the change Services (high QPS).
	Client    kubernetes.Interface
	Namespace string
	// APIServer is the apiserver's host:port on the host's loopback; CAData and
	// Token let a proxy in a namespace reach it through a forwarder.
	APIServer string
	CAData    []byte
	Token     string
	// Dir holds kubeconfigs and proxy logs.
	Dir string
	// Changes is the number of change samples wanted per run.
	Changes int
	// ChangeBudget bounds one run's change loop; Deadline ends every change loop
	// (the whole benchmark's bound, less what the rest needs).
	ChangeBudget time.Duration
	Deadline     time.Time
	// Logf prints progress.
	Logf func(format string, args ...any)
}

// Timeouts of a run.
const (
	// changeTimeout bounds the wait for one change's element.
	changeTimeout = 2 * time.Minute
	// seenWait bounds the wait for a change's watch event once its element
	// is in the kernel.
	seenWait = 10 * time.Second
	// syncLineWait bounds the wait for the log line of the sync that wrote a
	// change's element.
	syncLineWait = 10 * time.Second
	// nftTimeout bounds one `nft list map`.
	nftTimeout = 2 * time.Minute
)

// fullSyncTimeout bounds the wait for the first full sync at size n.
func fullSyncTimeout(n int) time.Duration {
	return 3*time.Minute + time.Duration(n)*10*time.Millisecond
}

// Run runs tool against the n Services present: fresh namespace, first full
// sync, element count, memory, then the change loop. It always cleans up what
// it made (namespace, process, change Services). Err in the result says why
// it stopped early.
func (b *Bench) Run(ctx context.Context, tool Tool, n int) (res Result) {
	res = Result{Tool: tool.Name, N: n}
	fail := func(format string, args ...any) Result {
		res.Err = fmt.Sprintf(format, args...)
		return res
	}
	name := fmt.Sprintf("sn-bench-%s-%d", tool.Short, os.Getpid())
	_ = netns.DeleteNamed(name) // a leftover of a killed run of this pid
	ns, err := netns.Create(name)
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := ns.Delete(); err != nil {
			res.Err = strings.TrimPrefix(res.Err+"; ", "; ") + err.Error()
		}
	}()
	kc := filepath.Join(b.Dir, fmt.Sprintf("%s-%d.kubeconfig", tool.Short, n))
	if !tool.Files {
		fctx, stopForward := context.WithCancel(ctx)
		defer stopForward()
		addr, err := netns.Forward(fctx, ns, "127.0.0.1:0", b.APIServer)
		if err != nil {
			return fail("%v", err)
		}
		if err := writeKubeconfig(kc, "https://"+addr, b.CAData, b.Token); err != nil {
			return fail("%v", err)
		}
	}

	// The change Services' slices exist before the proxy starts, so that each
	// change is one Service create and nothing else.
	chg := make([]string, b.Changes)
	for i := range chg {
		chg[i] = fmt.Sprintf("chg-%s-%d-%03d", tool.Short, n, i)
	}
	defer b.deleteChanges(chg)
	err = ForEach(ctx, 0, len(chg), 8, 0, nil, func(ctx context.Context, i int) error {
		return CreateSlice(ctx, b.Client, b.Namespace, chg[i], EndpointIPs(60000+i))
	})
	if err != nil {
		return fail("pre-create change slices: %v", err)
	}

	var m *manifest
	if tool.Files {
		dir := filepath.Join(b.Dir, fmt.Sprintf("%s-%d", tool.Short, n))
		if err := os.RemoveAll(dir); err != nil {
			return fail("%v", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail("%v", err)
		}
		if m, err = newManifest(ctx, b.Client, b.Namespace, filepath.Join(dir, "cluster.yaml")); err != nil {
			return fail("%v", err)
		}
		if _, err := m.write(); err != nil {
			return fail("%v", err)
		}
		kc = m.path
		if len(tool.Warm) > 0 {
			cmd := exec.Command(tool.Warm[0], append(tool.Warm[1:], m.path)...)
			if out, err := runTimeout(cmd, 5*time.Minute); err != nil {
				return fail("warming: %v: %s", err, out)
			}
		}
	}
	argv := tool.Argv(kc)
	var sockets *SocketWait
	if tool.Sockets {
		cg, err := newBenchCgroup(name)
		if err != nil {
			return fail("%v", err)
		}
		defer func() {
			if err := cg.remove(); err != nil {
				res.Err = strings.TrimPrefix(res.Err+"; ", "; ") + err.Error()
			}
		}()
		argv = append(argv, "--cgroup", cg.path)
		sockets = &SocketWait{Dir: cg.dir}
		defer sockets.Close()
	}
	logPath := filepath.Join(b.Dir, fmt.Sprintf("%s-%d.log", tool.Short, n))
	p, err := StartProc(ns, tool.Name, logPath, argv...)
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			res.Err = strings.TrimPrefix(res.Err+"; ", "; ") + err.Error()
		}
		if res.Err != "" {
			b.Logf("%s N=%d: log %s, last lines:\n%s", tool.Name, n, logPath, p.Tail(30))
		}
	}()

	sctx, cancel := context.WithTimeout(ctx, fullSyncTimeout(n))
	first, _, err := p.WaitSync(sctx, 0, func(s Sync) bool { return s.IsFirstFullIPv4() })
	cancel()
	if err != nil {
		return fail("%v", err)
	}
	res.Full, res.Ready = first.Elapsed, first.At.Sub(p.Started)
	count, err := countFrontends(ns, tool.Frontends)
	if err != nil {
		return fail("%v", err)
	}
	res.Elements = count
	if res.RSS, res.HWM, err = p.Memory(); err != nil {
		return fail("%v", err)
	}
	b.Logf("%s N=%d: first full sync %s (ready %s after start), %d frontends in %s, RSS %s (peak %s)",
		tool.Name, n, FmtDur(res.Full), FmtDur(res.Ready), count, tool.Frontends, FmtMiB(res.RSS), FmtMiB(res.HWM))
	if count < n {
		return fail("first full sync left %d frontends in %s, want >= %d", count, tool.Frontends, n)
	}

	mon, err := StartMonitor(ctx, ns, tool.Frontends)
	if err != nil {
		return fail("%v", err)
	}
	defer func() { res.Overruns = mon.Overruns(); mon.Close() }()
	man := m
	var wc *WatchClock
	if !tool.Files {
		if wc, err = StartWatchClock(ctx, b.Client, b.Namespace); err != nil {
			return fail("%v", err)
		}
		defer func() {
			if err := wc.Err(); err != nil {
				res.Note = strings.TrimPrefix(res.Note+"; ", "; ") + err.Error()
			}
			wc.Close()
		}()
	}
	// Like every later change, the first finds the min-sync-period gate open:
	// it comes a spacing after the full sync's log line.
	if err := b.changes(ctx, tool, p, mon, sockets, wc, man, chg, first.At, &res); err != nil {
		return fail("%v", err)
	}
	if res.RSSEnd, res.HWM, err = p.Memory(); err != nil {
		return fail("%v", err)
	}
	return res
}

// changes creates the change Services one at a time, the first a spacing
// after lastSync, and records each one's create-to-kernel latency and, as
// the watch clock saw the Service, its programming latency. For a file
// tool (man not nil) each created Service is then added to the manifest,
// and its latency runs from the manifest's rename; its programming latency
// is the same.
func (b *Bench) changes(ctx context.Context, tool Tool, p *Proc, m *Monitor, sockets *SocketWait, wc *WatchClock, man *manifest, names []string, lastSync time.Time, res *Result) error {
	spacing := tool.MinSyncPeriod + 200*time.Millisecond
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(lastSync.Add(spacing))):
	}
	stop := time.Now().Add(b.ChangeBudget)
	if !b.Deadline.IsZero() && b.Deadline.Before(stop) {
		stop = b.Deadline
	}
	// creates holds each measured change's Create call, to print beside it:
	// a slow change is the apiserver's or the proxy's.
	var creates []time.Duration
	for i, name := range names {
		if time.Now().After(stop) {
			b.Logf("%s N=%d: change budget spent after %d changes", tool.Name, res.N, i)
			res.Note = fmt.Sprintf("time budget: %d of %d changes measured", i, len(names))
			return nil
		}
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s: %w", tool.Name, err)
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		t0 := time.Now()
		svc, err := b.Client.CoreV1().Services(b.Namespace).Create(cctx, NewService(b.Namespace, name), metav1.CreateOptions{})
		res.Creates = append(res.Creates, time.Since(t0))
		cancel()
		if err != nil {
			return fmt.Errorf("create change service %s: %w", name, err)
		}
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil {
			return fmt.Errorf("change service %s: clusterIP %q: %w", name, svc.Spec.ClusterIP, err)
		}
		if man != nil {
			if err := man.add(svc); err != nil {
				return err
			}
			w0 := time.Now()
			if t0, err = man.write(); err != nil {
				return err
			}
			res.Creates[len(res.Creates)-1] = time.Since(w0)
		}
		wctx, cancel := context.WithTimeout(ctx, changeTimeout)
		at, err := m.Wait(wctx, ip)
		if err == nil && sockets != nil {
			at, err = sockets.Wait(wctx, netip.AddrPortFrom(ip, servicePort))
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			res.Timeouts++
			b.Logf("%s N=%d: change %d (%s %s): %v", tool.Name, res.N, i, name, ip, err)
			continue
		}
		res.Changes = append(res.Changes, at.Sub(t0))
		creates = append(creates, res.Creates[len(res.Creates)-1])
		if man != nil {
			res.Programs = append(res.Programs, at.Sub(t0))
		} else if seen, ok := wc.Seen(ctx, name, seenWait); ok {
			res.Programs = append(res.Programs, at.Sub(seen))
		}
		if (i+1)%10 == 0 || i+1 == len(names) {
			from := max(0, len(res.Changes)-10)
			var ls []string
			for j, d := range res.Changes[from:] {
				ls = append(ls, FmtDur(d)+" (create "+FmtDur(creates[from+j])+")")
			}
			b.Logf("%s N=%d: %d changes, p50 %s, p99 %s; last ones, each with its Create call: %s", tool.Name, res.N, i+1,
				FmtDur(res.P50()), FmtDur(res.P99()), strings.Join(ls, " "))
		}
		// Spacing, not synchronisation: the next change must find the tool's
		// min-sync-period gate open, whether the tool counts it from the start
		// of the last sync (before the element arrived) or from its end (its
		// log line: kube-proxy's runner).
		// (The log line may be read before the event: both race in this
		// process; any sync line after the create will do, the latest counts.)
		sctx, cancel := context.WithTimeout(ctx, syncLineWait)
		_, _, _ = p.WaitSync(sctx, 0, func(s Sync) bool { return !s.At.Before(t0) && s.IsIPv4() })
		cancel()
		ref := at
		for _, s := range p.Syncs() {
			if s.IsIPv4() && s.At.After(ref) {
				ref = s.At
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(ref.Add(spacing))):
		}
	}
	return nil
}

// deleteChanges removes the change Services and slices (bounded; errors logged).
func (b *Bench) deleteChanges(names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := ForEach(ctx, 0, len(names), 8, 0, nil, func(ctx context.Context, i int) error {
		return DeletePair(ctx, b.Client, b.Namespace, names[i])
	})
	if err != nil {
		b.Logf("delete change services: %v", err)
	}
}

// countFrontends counts the frontends of where (family ip) in ns with the nft
// CLI (once per run, outside any timing): the elements of its maps, or the
// frontend rules of its chain.
func countFrontends(ns *netns.NS, where Frontends) (int, error) {
	if where.Chain != "" {
		out, err := runTimeout(ns.Command("nft", "list", "chain", "ip", where.Tables.Name, where.Chain), nftTimeout)
		if err != nil {
			return 0, fmt.Errorf("list chain %s: %w", where.Chain, err)
		}
		return countFrontendRules(string(out)), nil
	}
	out, err := runTimeout(ns.Command("nft", "list", "maps", "ip"), nftTimeout)
	if err != nil {
		return 0, fmt.Errorf("list maps: %w", err)
	}
	return countMapElements(string(out), where.Tables, where.Set), nil
}

// reFrontendRule is a rule of `nft list chain` output that matches one
// destination address and port and jumps (or goes) to a chain: the CLI's view
// of a RuleEvent.Frontend.
var reFrontendRule = regexp.MustCompile(`\bip6? daddr [0-9a-fA-F.:]+ .*\bdport [0-9]+ .*\b(?:jump|goto) `)

// countFrontendRules counts the frontend rules in `nft list chain` output.
func countFrontendRules(out string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if reFrontendRule.MatchString(line) {
			n++
		}
	}
	return n
}

// countMapElements counts the verdict elements ("goto ") of map name in the
// matching tables of `nft list maps` output.
func countMapElements(out string, tables TableMatch, name string) int {
	n := 0
	table, in := "", false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "table" && f[3] == "{":
			table = f[2]
		case len(f) == 3 && f[0] == "map" && f[2] == "{":
			in = f[1] == name && tables.Match(table)
		case len(f) == 1 && f[0] == "}":
			in = false
		case in:
			n += strings.Count(line, "goto ")
		}
	}
	return n
}

// runTimeout runs cmd, killing it after d, and returns its stdout.
func runTimeout(cmd *exec.Cmd, d time.Duration) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	timer := time.AfterFunc(d, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		return nil, fmt.Errorf("killed after %v", d)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// writeKubeconfig writes a token kubeconfig for server.
func writeKubeconfig(path, server string, ca []byte, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

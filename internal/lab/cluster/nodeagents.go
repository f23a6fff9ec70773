package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// Node proxies (Info.Proxy, from lab.Options.Proxy): what programs the
// nodes' Service data plane.
const (
	ProxySvcnet             = "svcnet"              // svcnet proxy (default)
	ProxyKubeProxyNFTables  = "kube-proxy-nftables" // upstream kube-proxy, --proxy-mode nftables
	ProxyKubeProxyIPTables  = "kube-proxy-iptables" // upstream kube-proxy, --proxy-mode iptables
	kubeProxyBinary         = "kube-proxy"
	kubeProxyHealthzPort    = 10256 // kube-proxy's and svcnet proxy's default
	kubeProxyMetricsAddr    = "127.0.0.1:10249"
	helperHealthzPort       = 10266 // svcnet proxy --data-plane none beside kube-proxy
	helperMetricsAddr       = "127.0.0.1:10269"
	svcnetReadyTimeout      = 60 * time.Second
	kubeProxyReadyTimeout   = 3 * time.Minute // iptables mode needs ~40 s for a first sync at 10k Services
	agentCleanupTimeout     = 2 * time.Minute
	agentStopGrace          = 5 * time.Second
	kubeProxyVerbosity      = "--v=2" // logs "SyncProxyRules complete" with its elapsed time
	kubeProxyNodePortAddrs  = "primary"
	kubeProxyConntrackFlags = "--conntrack-max-per-core=0" // nf_conntrack_max is read-only in a netns
)

// Proxies lists the values of Info.Proxy.
var Proxies = []string{ProxySvcnet, ProxyKubeProxyNFTables, ProxyKubeProxyIPTables}

// kubeProxyMode is kube-proxy's --proxy-mode for proxy, or "" for svcnet.
func kubeProxyMode(proxy string) string {
	switch proxy {
	case ProxyKubeProxyNFTables:
		return "nftables"
	case ProxyKubeProxyIPTables:
		return "iptables"
	}
	return ""
}

// CheckProxy validates a node proxy for a lab on controlPlane: a known one,
// and kube-proxy only on the kube control plane (it reads a real
// kube-apiserver; the embedded control plane has none).
func CheckProxy(lab, proxy, controlPlane string) error {
	if !slices.Contains(Proxies, proxy) {
		return fmt.Errorf("lab %s: --proxy %q: want one of %s", lab, proxy, strings.Join(Proxies, ", "))
	}
	if kubeProxyMode(proxy) != "" && controlPlane != ControlPlaneKube {
		return fmt.Errorf("lab %s: --proxy %s needs --control-plane %s: kube-proxy reads a real kube-apiserver, and the %s control plane has none",
			lab, proxy, ControlPlaneKube, controlPlane)
	}
	return nil
}

// CheckDataPlane validates a Service data plane for svcnet proxy on a lab
// whose nodes run proxy: none is always valid; one is for svcnet proxy as
// the nodes' Service proxy, since beside kube-proxy svcnet proxy programs no
// Service (--data-plane none).
func CheckDataPlane(lab, proxy, dataPlane string) error {
	if dataPlane != "" && kubeProxyMode(proxy) != "" {
		return fmt.Errorf("lab %s: data plane %q: the nodes run %s for Services; svcnet proxy beside it runs --data-plane none", lab, dataPlane, proxy)
	}
	return nil
}

// agent is one node agent: a process in a node's namespace that answers
// /healthz on the node's address once it has synced.
type agent struct {
	what        string // for messages: "svcnet proxy" or "kube-proxy"
	argv        []string
	log         string
	healthzPort int
	// metricsAddr, when set, is where the agent serves kube-proxy's metrics;
	// it has synced once kubeproxy_sync_proxy_rules_last_timestamp_seconds
	// is set. kube-proxy needs it: its /healthz reports every family as
	// updated from the start, before its first sync.
	metricsAddr  string
	readyTimeout time.Duration
}

// agents returns node i's agents for the lab's proxy. The first is always a
// svcnet proxy: the node's Service proxy, or beside kube-proxy the pod routes
// and layer-2 speaker only (--data-plane none).
func (c *Cluster) agents(i int) []agent {
	state := c.CP.ProxyArgs()
	svState := state
	if f, ok := c.CP.(*File); ok { // no API server: the proxy's events go to the lab's state
		svState = append(slices.Clone(state), "--event-file", f.NodeEventsPath(topology.NodeName(i)))
	}
	sv := agent{what: "svcnet proxy", log: c.proxyLog(i), healthzPort: kubeProxyHealthzPort, readyTimeout: svcnetReadyTimeout,
		argv: svcnetProxyArgv(c.Info, svState, i, c.Names.HeartbeatKey())}
	if kubeProxyMode(c.Info.Proxy) == "" {
		return []agent{sv}
	}
	sv.healthzPort = helperHealthzPort
	kp := agent{what: "kube-proxy", log: c.kubeProxyLog(i), healthzPort: kubeProxyHealthzPort, metricsAddr: kubeProxyMetricsAddr, readyTimeout: kubeProxyReadyTimeout,
		argv: kubeProxyArgv(c.Info, state, i)}
	return []agent{sv, kp}
}

func (c *Cluster) proxyLog(i int) string {
	return c.Names.Path("logs", topology.NodeName(i)+".proxy.log")
}
func (c *Cluster) kubeProxyLog(i int) string {
	return c.Names.Path("logs", topology.NodeName(i)+".kube-proxy.log")
}

// ProxyLog is the log file of node i's svcnet proxy.
func (c *Cluster) ProxyLog(i int) string { return c.proxyLog(i) }

// startAgents starts node i's agents, supervised (startNodeAgent), and
// returns their supervisors' pids, in agents order.
func (c *Cluster) startAgents(ctx context.Context, i int, agents []agent) ([]int, error) {
	ns, err := netns.Open(c.Names.Node(i))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	pids := make([]int, len(agents))
	for k, a := range agents {
		if pids[k], err = c.startNodeAgent(ctx, ns, i, a); err != nil {
			return nil, err
		}
	}
	return pids, nil
}

// waitAgent waits until node i's agent a (its supervisor watched by w) has
// synced: its /healthz answers 200 with the status of at least one IP family
// (svcnet proxy reports a family once it has synced it), and with
// a.metricsAddr its metrics show a completed sync of IPv4. It fails at once,
// with the end of the agent's log, if the agent exits, and after
// a.readyTimeout.
func (c *Cluster) waitAgent(ctx context.Context, i int, a agent, w *ChildWatch) error {
	ns, err := netns.Open(c.Names.Node(i))
	if err != nil {
		return err
	}
	defer ns.Close()
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns)}, Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(c.Info.Stack().NodeAddr(i), uint16(a.healthzPort)))
	deadline := time.Now().Add(a.readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		if w.Ended() {
			return fmt.Errorf("node %s: %s exited:\n%s", topology.NodeName(i), a.what, topology.LogTail(a.log, 10))
		}
		if last = healthzSynced(hc, url); last == nil && a.metricsAddr != "" {
			last = metricsSynced(hc, "http://"+a.metricsAddr+"/metrics")
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %s: %s not synced after %s: %v:\n%s", topology.NodeName(i), a.what, a.readyTimeout, last, topology.LogTail(a.log, 10))
}

// healthzSynced returns nil when url answers 200 with a health body that reports at
// least one family (see healthSynced).
func healthzSynced(hc *http.Client, url string) error {
	body, err := getOK(hc, url, 64<<10)
	if err != nil {
		return err
	}
	return healthSynced(body)
}

// getOK GETs url and returns at most limit bytes of its body; an answer other
// than 200 is an error naming the status.
func getOK(hc *http.Client, url string, limit int64) ([]byte, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return body, nil
}

// healthSynced checks a /healthz body of kube-proxy's format: a proxy that
// has not synced any family yet reports no "status".
func healthSynced(body []byte) error {
	var h struct {
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("healthz body: %w", err)
	}
	if len(h.Status) == 0 {
		return fmt.Errorf("healthz: no family synced yet")
	}
	return nil
}

// lastSyncMetric is set by kube-proxy (and svcnet proxy) after every
// successful sync of a family.
const lastSyncMetric = `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`

// metricsSynced returns nil when url's metrics show a completed IPv4 sync.
func metricsSynced(hc *http.Client, url string) error {
	body, err := getOK(hc, url, 16<<20)
	if err != nil {
		return err
	}
	return lastSynced(string(body))
}

// lastSynced checks Prometheus text for a positive lastSyncMetric.
func lastSynced(text string) error {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, lastSyncMetric+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f > 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("metrics: no completed IPv4 sync yet")
}

// AgentPids returns the pids of every node's agents (svcnet proxy and, beside
// it, kube-proxy).
func (c *Cluster) AgentPids() ([]int, error) {
	var all []int
	for i := 1; i <= c.Info.Nodes; i++ {
		pids, err := c.agentPids(i)
		if err != nil {
			return nil, err
		}
		all = append(all, pids...)
	}
	return all, nil
}

// agentPids returns the pids of node i's agents (svcnet proxy, kube-proxy)
// running in its namespace, found by their command lines.
func (c *Cluster) agentPids(i int) ([]int, error) {
	pids, err := netns.PidsIn(netns.RunDir + "/" + c.Names.Node(i))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", topology.NodeName(i), err)
	}
	var out []int
	for _, p := range pids {
		if !topology.Alive(p) {
			continue
		}
		if agentKind(topology.Cmdline(p), topology.NodeName(i)) != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// agentKind names the node agent argv is for node (ProxySvcnet for any
// svcnet proxy, kubeProxyBinary for kube-proxy), or "" for another process.
func agentKind(argv []string, node string) string {
	if len(argv) < 2 || !slices.Contains(argv, node) {
		return ""
	}
	switch {
	case argv[1] == "proxy":
		return ProxySvcnet
	case filepath.Base(argv[0]) == kubeProxyBinary:
		return kubeProxyBinary
	}
	return ""
}

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/cni/hostport"
	iptplane "github.com/svcnet/svcnet/internal/dataplane/iptables"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// CheckKubeProxyBinary checks that dir holds kube-proxy when proxy is one.
func CheckKubeProxyBinary(lab, proxy, dir string) error {
	if kubeProxyMode(proxy) == "" {
		return nil
	}
	bin := filepath.Join(dir, kubeProxyBinary)
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("lab %s: --proxy %s: no kube-proxy executable at %s (tools/k8s/build.sh builds it and prints its directory)", lab, proxy, bin)
	}
	return nil
}

// StartNodes starts every node's agents, then waits until all have synced
// (so the nodes sync side by side).
func (c *Cluster) StartNodes(ctx context.Context, progress func(string, ...any)) error {
	all := make([][]agent, c.Info.Nodes+1)
	pids := make([][]int, c.Info.Nodes+1)
	for i := 1; i <= c.Info.Nodes; i++ {
		all[i] = c.agents(i)
		names := make([]string, len(all[i]))
		for k, a := range all[i] {
			names[k] = a.what
		}
		progress("node %s: starting %s", topology.NodeName(i), strings.Join(names, " and "))
		var err error
		if pids[i], err = c.startAgents(ctx, i, all[i]); err != nil {
			return err
		}
	}
	for i := 1; i <= c.Info.Nodes; i++ {
		for k, a := range all[i] {
			if err := c.waitAgent(ctx, i, a, NewChildWatch(pids[i][k], a.log)); err != nil {
				return err
			}
			if err := c.AgentRunning(ctx, nodeAgentPod(i, a), c.Info.Stack().NodeAddr(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Proxy returns the nodes' Service proxy (one of Proxies).
func (c *Cluster) Proxy() string {
	if c.Info.Proxy == "" {
		return ProxySvcnet
	}
	return c.Info.Proxy
}

// SetProxy replaces every node's Service proxy by proxy, keeping svcnet
// proxy's data plane (Info.DataPlane): SetProxyPlane with it.
func (c *Cluster) SetProxy(ctx context.Context, proxy string) error {
	return c.SetProxyPlane(ctx, proxy, c.Info.DataPlane)
}

// SetProxyPlane replaces every node's Service proxy by proxy and svcnet
// proxy's data plane by dataPlane ("" is the proxy's default; it must be ""
// beside kube-proxy, CheckDataPlane), keeping everything else (control
// plane, pods, Services): it stops the nodes' agents and their supervisors,
// removes their Pods and the old proxy's rules (svcnet proxy --cleanup, or
// kube-proxy --cleanup), checks that no rule of it is left, then starts the
// new agents and waits until they have synced. Same proxy and data plane:
// nothing is done. On failure the lab may be left without a proxy;
// SetProxyPlane again, or Down.
func (c *Cluster) SetProxyPlane(ctx context.Context, proxy, dataPlane string) error {
	if err := CheckProxy(c.Names.Lab, proxy, c.Info.ControlPlane); err != nil {
		return err
	}
	if err := CheckKubeProxyBinary(c.Names.Lab, proxy, c.Info.K8sBin); err != nil {
		return err
	}
	if err := CheckDataPlane(c.Names.Lab, proxy, dataPlane); err != nil {
		return err
	}
	old, oldPlane := c.Proxy(), c.Info.DataPlane
	if proxy == old && dataPlane == oldPlane {
		return nil
	}
	for i := 1; i <= c.Info.Nodes; i++ {
		if err := c.stopNodeAgents(i); err != nil {
			return fmt.Errorf("stop %s: %w", old, err)
		}
		if err := c.removeNodeAgentPods(ctx, i); err != nil {
			return err
		}
	}
	for i := 1; i <= c.Info.Nodes; i++ {
		if err := c.cleanupNode(ctx, i, old, oldPlane); err != nil {
			return err
		}
	}
	// The eBPF plane's pins go with the lab's BPF filesystem (its load
	// balancers stay attached while pinned, whatever --cleanup removed);
	// a new eBPF plane gets a fresh one.
	pinned := ProxyPins(c.Info)
	c.Info.Proxy, c.Info.DataPlane = proxy, dataPlane
	if pinned {
		if err := topology.UnmountBPFFS(c.Names); err != nil {
			return err
		}
	}
	if ProxyPins(c.Info) {
		if err := topology.MountBPFFS(c.Names); err != nil {
			return err
		}
	}
	if err := WriteInfo(c.Names, c.Info); err != nil {
		return err
	}
	return c.StartNodes(ctx, func(string, ...any) {})
}

// cleanupNode removes the rules proxy (with svcnet proxy's data plane
// dataPlane) left on node i (its agents stopped) and then checks that
// neither svcnet's nor kube-proxy's are left (leftoverRules).
func (c *Cluster) cleanupNode(ctx context.Context, i int, proxy, dataPlane string) error {
	if out, err := c.runInNode(ctx, i, cleanupArgv(c.Info, proxy)...); err != nil {
		return fmt.Errorf("node %s: %s cleanup: %w: %s", topology.NodeName(i), proxy, err, out)
	}
	if usedIPTables(proxy, dataPlane) {
		if err := c.deleteIPTablesNFT(ctx, i); err != nil {
			return err
		}
	}
	left, err := c.leftoverRules(ctx, i)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("node %s: after the %s cleanup, rules are left: %s", topology.NodeName(i), proxy, strings.Join(left, "; "))
	}
	return nil
}

// usedIPTables reports whether proxy, with svcnet proxy's data plane
// dataPlane, leaves iptables-nft's tables behind after its cleanup:
// kube-proxy in either mode, and svcnet proxy's iptables plane (both remove
// their chains only; deleteIPTablesNFT removes the rest).
func usedIPTables(proxy, dataPlane string) bool {
	return kubeProxyMode(proxy) != "" || dataPlane == iptplane.Name
}

// deleteIPTablesNFT deletes node i's iptables-nft tables. kube-proxy
// --cleanup leaves them, with their base chains (which still see every
// packet) and the KUBE-FIREWALL chain (the kubelet's since KEP-3178). Nothing
// else in a lab node uses iptables. Rules of iptables-legacy are not touched;
// leftoverRules reports them.
func (c *Cluster) deleteIPTablesNFT(ctx context.Context, i int) error {
	tables, err := c.nodeTables(ctx, i)
	if err != nil {
		return err
	}
	for _, t := range iptablesNFTTables(tables) {
		if out, err := c.runInNode(ctx, i, append([]string{"nft", "delete", "table"}, strings.Fields(t)...)...); err != nil {
			return fmt.Errorf("node %s: nft delete table %s: %w: %s", topology.NodeName(i), t, err, out)
		}
	}
	return nil
}

// iptablesNFTTables returns the tables of iptables-nft among tables ("family
// name"): filter, nat, mangle, raw and security of ip and ip6.
func iptablesNFTTables(tables []string) []string {
	var out []string
	for _, t := range tables {
		f := strings.Fields(t)
		if len(f) == 2 && (f[0] == "ip" || f[0] == "ip6") && slices.Contains([]string{"filter", "nat", "mangle", "raw", "security"}, f[1]) {
			out = append(out, t)
		}
	}
	return out
}

// leftoverRules lists what a Service proxy programmed that node i still
// holds: nftables tables other than the CNI plugin's hostport tables, and
// iptables chains of kube-proxy (KUBE-*) in iptables-save's view (legacy or
// nft, whichever the host's iptables is).
func (c *Cluster) leftoverRules(ctx context.Context, i int) ([]string, error) {
	left, err := c.nodeTables(ctx, i)
	if err != nil {
		return nil, err
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		if _, err := exec.LookPath(save); err != nil {
			continue // no iptables on this host: kube-proxy iptables mode cannot have run
		}
		out, err := c.runInNode(ctx, i, save)
		if err != nil {
			return nil, fmt.Errorf("node %s: %s: %w: %s", topology.NodeName(i), save, err, out)
		}
		left = append(left, kubeChains(out)...)
	}
	return left, nil
}

// nodeTables lists node i's nftables tables but the CNI plugin's.
func (c *Cluster) nodeTables(ctx context.Context, i int) ([]string, error) {
	out, err := c.runInNode(ctx, i, "nft", "-j", "list", "tables")
	if err != nil {
		return nil, fmt.Errorf("node %s: nft list tables: %w: %s", topology.NodeName(i), err, out)
	}
	t, err := foreignTables(out)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", topology.NodeName(i), err)
	}
	return t, nil
}

// foreignTables returns the tables in `nft -j list tables` output (out)
// other than the CNI plugin's hostport tables, as "family name". (The plain
// text listing of nft 1.0.6 omits tables that carry a comment, as
// kube-proxy's do.)
func foreignTables(out string) ([]string, error) {
	var doc struct {
		Nftables []struct {
			Table *struct {
				Family string `json:"family"`
				Name   string `json:"name"`
			} `json:"table"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("nft -j list tables: %w", err)
	}
	var left []string
	for _, o := range doc.Nftables {
		if o.Table != nil && o.Table.Name != hostport.TableName {
			left = append(left, o.Table.Family+" "+o.Table.Name)
		}
	}
	return left, nil
}

// kubeChains returns the chains named KUBE-* declared in iptables-save
// output (":KUBE-SERVICES - [0:0]").
func kubeChains(out string) []string {
	var left []string
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, ":"); ok && strings.HasPrefix(name, "KUBE-") {
			left = append(left, "iptables chain "+strings.Fields(name)[0])
		}
	}
	return left
}

// runInNode runs argv in node i's namespace and cgroup, bounded by agentCleanupTimeout,
// and returns its combined output.
func (c *Cluster) runInNode(ctx context.Context, i int, argv ...string) (string, error) {
	ns, err := netns.Open(c.Names.Node(i))
	if err != nil {
		return "", err
	}
	defer ns.Close()
	ctx, cancel := context.WithTimeout(ctx, agentCleanupTimeout)
	defer cancel()
	cmd := ns.CommandContext(ctx, argv...)
	dir, err := c.NodeCgroup(i)
	if err != nil {
		return "", err
	}
	cg, err := cgroup.Open(dir)
	if err != nil {
		return "", err
	}
	defer cg.Close()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	return strings.TrimSpace(string(out)), err
}

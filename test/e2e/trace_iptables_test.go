package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// iptablesPlane is the --data-plane value of the iptables plane.
const iptablesPlane = "iptables"

// TestTraceIPTablesLab: in a lab whose nodes run svcnet proxy --data-plane
// iptables, `iptables-save -t nat` on a node shows kube-proxy's chains for a
// Service, and `svcnet lab trace ... --verify` agrees with the kernel: the
// tracer reads each node's rules back with iptables-save, explains the
// packet with kube-proxy's own rules (the statistic cascade giving each
// endpoint 1/n), and the kernel's nftrace events of iptables-nft's chains
// name the same chains and rules.
func TestTraceIPTablesLab(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	l := labtest.Up(t, ctx, lab.Options{Name: labtest.Name("trcipt"), Nodes: 3, ControlPlane: cluster.ControlPlaneFile,
		Binary: svcnetBin, DataPlane: iptablesPlane, Progress: testWriter{t}}, "fixture.yaml")
	e := &env{t: t, ctx: ctx, l: l}
	web, np := e.service("web"), e.service("web-np")
	// nodesNAT returns every node's nat and filter tables as save (the
	// iptables-save of a variant) prints them, without its comment lines
	// and counters.
	nodesNAT := func(save string) (string, error) {
		var b strings.Builder
		for i := 1; i <= 3; i++ {
			ns, err := netns.Open(e.l.Names().Node(i))
			if err != nil {
				return "", err
			}
			for _, table := range []string{"nat", "filter"} {
				out, err := ns.CommandContext(ctx, save, "-t", table).Output()
				if err != nil {
					ns.Close()
					return "", err
				}
				for _, line := range strings.Split(string(out), "\n") {
					// iptables-legacy-save counts packets on chain lines.
					if c, _, ok := strings.Cut(line, " ["); ok && strings.HasPrefix(line, ":") {
						line = c
					}
					if !strings.HasPrefix(line, "#") {
						b.WriteString(line + "\n")
					}
				}
			}
			ns.Close()
			// The node-address pool's Service lists every node once the
			// speakers are all known: its rules are in the tables by then.
			if n := strings.Count(b.String(), `"default/web-nodeip loadbalancer IP"`); n != 3*i {
				return "", fmt.Errorf("node%d: %d rules for the LB IPs of default/web-nodeip so far, want 3 per node", i, n)
			}
			if i == 1 {
				for _, want := range []string{"-A KUBE-SERVICES ", "-A KUBE-SVC-", "-A KUBE-SEP-", `--comment "default/web-np"`,
					fmt.Sprintf("-d %s/32 -p tcp -m comment --comment \"default/web:", web.Spec.ClusterIP)} {
					if !strings.Contains(b.String(), want) {
						return "", fmt.Errorf("%s -t nat on node1 lacks %q", save, want)
					}
				}
			}
		}
		return b.String(), nil
	}
	// settle waits until the proxies have programmed the fixture and
	// settled: the tables (read with save) have not changed for 2s (a sync
	// in the middle of a trace rewrites chains, which --verify would
	// rightly see as another ruleset).
	settle := func(save string) {
		var prev string
		var since time.Time
		e.eventually("the proxies program the fixture and settle", func() error {
			if n := len(e.service("web-nodeip").Status.LoadBalancer.Ingress); n != 3 {
				return fmt.Errorf("default/web-nodeip has %d LB IPs, want the 3 node addresses", n)
			}
			cur, err := nodesNAT(save)
			if err != nil {
				return err
			}
			if cur != prev {
				prev, since = cur, time.Now()
			}
			if time.Since(since) < 2*time.Second {
				return fmt.Errorf("the nodes' tables changed %s ago", time.Since(since).Round(time.Millisecond))
			}
			return nil
		})
	}
	settle("iptables-nft-save")

	last := e.pod("web-3").Status.PodIP + ":80"
	name, reopen := e.release(t)
	labTraceVerify(t, e, name, "client", "default/web-np",
		"(Service default/web-np, NodePort)", "(--data-plane iptables)", "rule: -A KUBE-NODEPORTS -p tcp -m comment --comment \"default/web-np\" -m tcp --dport "+fmt.Sprint(np.Spec.Ports[0].NodePort),
		"-j DNAT --to-destination ", "endpoint  default/web-np, cluster endpoints", "un-DNAT", "summary: 2 rewrites")
	out := labTraceVerify(t, e, name, "client-1", "default/web", "endpoint  default/web:http, cluster endpoints")
	if n := strings.Count(out, " 1/3 "); n != 3 {
		t.Errorf("%d candidates of default/web at 1/3, want 3:\n%s", n, out)
	}
	// Every rule of the cascade: following the last endpoint (by address)
	// the packet passes over the first two, which --verbose shows.
	verbose, err := exec.CommandContext(ctx, svcnetBin, "lab", "trace", "--name", name, "client-1", "default/web", "--verbose", "--endpoint", last).CombinedOutput()
	if err != nil {
		t.Fatalf("svcnet lab trace --verbose: %v\n%s", err, verbose)
	}
	for _, want := range []string{"-m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-",
		"-m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-", "(--data-plane iptables)", "-j DNAT --to-destination " + last} {
		if !strings.Contains(string(verbose), want) {
			t.Errorf("svcnet lab trace --verbose lacks %q:\n%s", want, verbose)
		}
	}
	labTraceVerify(t, e, name, "client-1", "default/web-sticky", "sessionAffinity ClientIP")
	labTraceVerify(t, e, name, "client-1", "default/empty", "rejected", "-j REJECT --reject-with icmp-port-unreachable")
	labTraceVerify(t, e, name, "client", "default/web-lb-ranges", "filtered", "-A KUBE-PROXY-FIREWALL ")
	labTraceVerify(t, e, name, "client", "default/local-etp", "pod default/local-2")
	labTraceVerify(t, e, name, "client-1", web.Spec.ClusterIP+":81", "the probe's outcome is not compared: the packet leaves the cluster")

	// iptables-legacy: every node's rules moved to x_tables while its
	// proxy is stopped (SIGSTOP: it would repair the nf_tables tables),
	// then the proxy killed: restarted by its supervisor, it detects
	// iptables-legacy (Detect: legacy has the rules) and programs it.
	// nftrace cannot see x_tables rules: --verify says what it could not
	// check, and checks the rest: the rules read back equal the rendered
	// ones, conntrack's DNAT goes to a traced candidate, the probe ends as
	// traced.
	reopen()
	for i := 1; i <= 3; i++ {
		pid, err := e.l.ProxyPid(i)
		if err != nil || pid == 0 {
			t.Fatalf("node%d's proxy: pid %d, %v", i, pid, err)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("stop node%d's proxy %d: %v", i, pid, err)
		}
		toLegacy(t, ctx, e.l.Names().Node(i))
		if err := e.l.KillProxy(i, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		e.eventually(fmt.Sprintf("node%d's supervisor restarts its proxy", i), func() error {
			if now, err := e.l.ProxyPid(i); err != nil || now == 0 || now == pid {
				return fmt.Errorf("proxy pid %d (was %d): %v", now, pid, err)
			}
			return nil
		})
	}
	settle("iptables-legacy-save")
	for i := 1; i <= 3; i++ {
		ns, err := netns.Open(e.l.Names().Node(i))
		if err != nil {
			t.Fatal(err)
		}
		out, err := ns.CommandContext(ctx, "nft", "list", "tables").CombinedOutput()
		ns.Close()
		if err != nil || strings.Contains(string(out), "table ip nat") {
			t.Fatalf("node%d: nf_tables has iptables-nft's nat table again (%v):\n%s", i, err, out)
		}
	}
	name, reopen = e.release(t)
	defer reopen()
	for _, tc := range []struct{ from, to, want string }{
		{"client", "default/web-np", "connected"},
		{"client-1", "default/web", "connected"},
		{"client-3", "default/web-sticky", "connected"},
		{"client-1", "default/empty", "refused"},
	} {
		out, err := exec.CommandContext(ctx, svcnetBin, "lab", "trace", "--name", name, tc.from, tc.to, "--verify").CombinedOutput()
		if err != nil {
			t.Fatalf("legacy: svcnet lab trace %s %s --verify: %v\n%s", tc.from, tc.to, err, out)
		}
		for _, want := range []string{"unchecked: node node", "iptables-legacy: its rules are x_tables rules, which nftrace does not see",
			"verify: the kernel agrees where it could be checked", "verify: probe ", ": " + tc.want} {
			if !strings.Contains(string(out), want) {
				t.Errorf("legacy: svcnet lab trace %s %s --verify lacks %q:\n%s", tc.from, tc.to, want, out)
			}
		}
	}
}

// toLegacy moves a node's nat and filter tables, both families, from
// iptables-nft to iptables-legacy: the saved rules restored as x_tables
// rules, the nf_tables tables deleted.
func toLegacy(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	ns, err := netns.Open(node)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	for _, ip := range []string{"iptables", "ip6tables"} {
		var saved []byte
		for _, table := range []string{"nat", "filter"} {
			out, err := ns.CommandContext(ctx, ip+"-nft-save", "-t", table).Output()
			if err != nil {
				t.Fatalf("%s: %s-nft-save -t %s: %v", node, ip, table, err)
			}
			saved = append(saved, out...)
		}
		cmd := ns.CommandContext(ctx, ip+"-legacy-restore")
		cmd.Stdin = strings.NewReader(string(saved))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %s-legacy-restore: %v\n%s", node, ip, err, out)
		}
	}
	for _, table := range []string{"ip nat", "ip filter", "ip6 nat", "ip6 filter"} {
		argv := append([]string{"nft", "delete", "table"}, strings.Fields(table)...)
		if out, err := ns.CommandContext(ctx, argv...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %v\n%s", node, argv, err, out)
		}
	}
}

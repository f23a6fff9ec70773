package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// A 2-node lab on the kube control plane whose nodes run upstream kube-proxy
// in nftables mode (cluster.ProxyKubeProxyNFTables): a pod reaches a ClusterIP,
// and the external client a NodePort and a LoadBalancer IP, through
// kube-proxy's rules; svcnet, there for the pod routes and the layer-2 speaker
// only, programs no Service (no table svcnet on any node); Lab.SetProxy then
// swaps kube-proxy for svcnet proxy, leaving nothing of kube-proxy, and the
// NodePort answers through svcnet; lab down removes everything. kube-proxy
// is supervised: killed, it is restarted.
func TestKubeProxyNFTablesLab(t *testing.T) {
	requireKubeTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := labtest.Name("kpbench") + "-e2e"
	l := labtest.Up(t, ctx, lab.Options{Name: name, Nodes: 2, ControlPlane: cluster.ControlPlaneKube,
		Proxy: cluster.ProxyKubeProxyNFTables, Binary: svcnetBin, Progress: testWriter{t}}, "kubeproxy.yaml")
	e := &env{t: t, ctx: ctx, l: l}
	if got := l.Proxy(); got != cluster.ProxyKubeProxyNFTables {
		t.Fatalf("lab proxy = %q, want %s", got, cluster.ProxyKubeProxyNFTables)
	}

	for i := 1; i <= 2; i++ {
		out := nodeRuleset(t, l, e, i)
		if !strings.Contains(out, "table ip kube-proxy {") {
			t.Errorf("node%d: no table ip kube-proxy: kube-proxy did not program the node", i)
		}
		if strings.Contains(out, "table ip svcnet {") || strings.Contains(out, "table ip6 svcnet {") || strings.Contains(out, "svcnet-nat-") {
			t.Errorf("node%d: svcnet programmed Services beside kube-proxy:\n%s", i, out)
		}
	}

	web := e.service("web")
	e.eventually("ClusterIP from pod cli", func() error { return e.curl("cli", clusterURL(web, 80), 1, time.Second)[0].Err })
	pods, _ := answered(t, "ClusterIP from cli", e.curl("cli", clusterURL(web, 80), 4, 2*time.Second))
	if err := onlyKeys(pods, "web-2"); err != nil {
		t.Fatal(err)
	}
	np := web.Spec.Ports[0].NodePort
	e.eventually("NodePort on node1 from the client", func() error { return e.curl("client", nodeURL(1, np), 1, time.Second)[0].Err })
	pods, clients := answered(t, "NodePort from the client", e.curl("client", nodeURL(1, np), 4, 2*time.Second))
	if err := onlyKeys(pods, "web-2"); err != nil {
		t.Fatal(err)
	}
	if clients[topology.ClientAddr.String()] > 0 {
		t.Fatalf("externalTrafficPolicy Cluster: kube-proxy must masquerade, but the pod saw the client %s", topology.ClientAddr)
	}
	lb := fmt.Sprintf("http://%s:80/", e.lbIP("web"))
	e.eventually("LoadBalancer IP from the client", func() error { return e.curl("client", lb, 1, time.Second)[0].Err })

	// kube-proxy is supervised like every lab process: kill -9 restarts it at
	// once, `lab get pods` shows the restart, and the NodePort still answers.
	// The CLI takes the lab's lock, so this handle lets go of it meanwhile.
	l.Close()
	killSupervised(t, e, "kube-system", "kube-proxy-node1")
	waitRow(t, e, "pods", "kube-system", "kube-proxy-node1", func(r []string) bool {
		return r[1] == "1/1" && r[2] == "Running" && strings.HasPrefix(r[3], "1 (")
	})
	e.eventually("NodePort on node1 after kube-proxy's restart", func() error { return e.curl("client", nodeURL(1, np), 1, time.Second)[0].Err })
	l, err := lab.Open(ctx, name)
	if err != nil {
		t.Fatalf("reopen the lab: %v", err)
	}
	e.l = l
	t.Cleanup(l.Close)

	// Lab.SetProxy (the data-path benchmark's swap): kube-proxy's rules go,
	// svcnet's come, the same Service answers through them.
	if err := l.SetProxy(ctx, cluster.ProxySvcnet); err != nil {
		t.Fatalf("swap to svcnet: %v", err)
	}
	for i := 1; i <= 2; i++ {
		out := nodeRuleset(t, l, e, i)
		if strings.Contains(out, "kube-proxy") || strings.Contains(out, "KUBE-") || !strings.Contains(out, "table ip svcnet {") {
			t.Errorf("node%d after the swap to svcnet: want svcnet's tables and nothing of kube-proxy:\n%s", i, out)
		}
	}
	e.eventually("NodePort on node1 through svcnet", func() error { return e.curl("client", nodeURL(1, np), 1, time.Second)[0].Err })
	if pods, _ := answered(t, "NodePort through svcnet", e.curl("client", nodeURL(1, np), 4, 2*time.Second)); onlyKeys(pods, "web-2") != nil {
		t.Fatalf("NodePort through svcnet answered by %v, want web-2", pods)
	}

	l.Close() // Down, and the CLI, take the lab's lock
	// The agents' Pods follow the swap: svcnet proxy's, and no kube-proxy's.
	for i := 1; i <= 2; i++ {
		waitRow(t, e, "pods", "kube-system", fmt.Sprintf("svcnet-proxy-node%d", i), func(r []string) bool { return r[1] == "1/1" && r[2] == "Running" })
		if r := getRow(t, e, "pods", "kube-system", fmt.Sprintf("kube-proxy-node%d", i)); r != nil {
			t.Errorf("after the swap to svcnet, lab get pods still lists %q", r)
		}
	}
	pids := labPids(t, name)
	if err := lab.Down(name); err != nil {
		t.Fatalf("lab down: %v", err)
	}
	checkLabGone(t, name, pids)
}

// nodeRuleset returns node i's `nft list ruleset` (iptables-nft tables
// included, where kube-proxy's leftovers would show as KUBE-* chains).
func nodeRuleset(t *testing.T, l *lab.Lab, e *env, i int) string {
	t.Helper()
	out, err := l.Command(e.place(topology.NodeName(i)), "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("node%d: nft list ruleset: %v: %s", i, err, out)
	}
	return string(out)
}

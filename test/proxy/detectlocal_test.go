package proxy_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// podBridge is the node's bridge for addBridgedPod's pods, as a bridge CNI
// makes it.
const podBridge = "cbr0"

// addBridgedPod creates a pod namespace with address 192.168.1.<host> (and
// fd00:192:168:1::<host>) whose veth "vb<host>" is a port of the node's
// bridge cbr0 (made on first use, with the pod gateway addresses), as with a
// bridge CNI; addPod's pods have routed veths "vp<host>" instead.
func (c *cluster) addBridgedPod(name string, host int) *pod {
	t := c.t
	t.Helper()
	if _, err := c.nodeRun("ip", "link", "show", podBridge); err != nil {
		ipBatch(t, c.node,
			"link add "+podBridge+" type bridge",
			"addr add "+podGateway.String()+"/32 dev "+podBridge,
			"addr add "+podGW6.String()+"/128 dev "+podBridge+" nodad",
			"link set "+podBridge+" up",
		)
	}
	p := c.newPod(name, host)
	veth := fmt.Sprintf("vb%d", host)
	ipBatch(t, c.node,
		"link add "+veth+" type veth peer name eth0 netns "+p.ns.Name(),
		"link set "+veth+" master "+podBridge,
		"link set "+veth+" up",
		"route add "+p.ip.String()+"/32 dev "+podBridge,
		"route add "+p.ip6.String()+"/128 dev "+podBridge,
	)
	return c.startPod(p)
}

// TestDetectLocalModes sends real connections to a ClusterIP from four
// senders under each --detect-local-mode and checks, at the endpoint, which
// were masqueraded: kube-proxy masquerades ClusterIP traffic that the mode
// does not count as from a local pod. Senders: "near" (routed veth vp11,
// inside node1's podCIDR 192.168.1.0/25), "far" (routed veth vp140, outside
// it but inside the cluster CIDR), "bridged" (192.168.1.50 on the bridge
// cbr0) and the external client (172.26.236.10, on eth0).
func TestDetectLocalModes(t *testing.T) {
	c := newCluster(t)
	server := c.addPod("server", 12)
	near := c.addPod("near", 11)
	far := c.addPod("far", 140)
	bridged := c.addBridgedPod("bridged", 50)
	svc := newService("web", []string{"10.96.0.60"}, tcpPort(80))
	objs := nodes()
	objs[0].(*corev1.Node).Spec.PodCIDRs = []string{"192.168.1.0/25", "fd00:192:168:1::/64"}
	writeManifests(t, c.dir, append(objs, svc, v4(svc, local(server)))...)

	for _, mode := range []struct {
		args []string
		kept []string // senders whose address the endpoint sees
	}{
		{[]string{"--detect-local-mode", "ClusterCIDR"}, []string{"near", "far", "bridged"}},
		{[]string{"--detect-local-mode", "NodeCIDR"}, []string{"near", "bridged"}},
		{[]string{"--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", podBridge}, []string{"bridged"}},
		{[]string{"--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", "vp"}, []string{"near", "far"}},
	} {
		t.Run(mode.args[1], func(t *testing.T) {
			p := c.startProxy(mode.args...)
			defer func() {
				if err := p.stop(t, syscall.SIGTERM); err != nil {
					t.Errorf("svcnet proxy exit: %v", err)
				}
			}()
			for _, s := range []struct {
				name string
				from *pod
				src  netip.Addr
			}{{"near", near, near.ip}, {"far", far, far.ip}, {"bridged", bridged, bridged.ip}, {"client", nil, clientIP}} {
				ns := c.client
				if s.from != nil {
					ns = s.from.ns
				}
				r, err := tcpReq(ns, "10.96.0.60:80", reqTimeout)
				if err != nil {
					t.Fatalf("%s to the ClusterIP: %v", s.name, err)
				}
				want := podGateway // masqueraded to the node's address towards the endpoint
				kept := false
				for _, k := range mode.kept {
					kept = kept || k == s.name
				}
				if kept {
					want = s.src
				}
				if r.Pod != server.name || r.Src != want {
					t.Errorf("%s (%s) to the ClusterIP: answered by %s seeing %s, want %s seeing %s (masqueraded: %v)",
						s.name, s.src, r.Pod, r.Src, server.name, want, !kept)
				}
			}
		})
	}
}

// TestMasqueradeBit: with --masquerade-bit 5 the rules set, test and clear
// mark 0x20 and no other (planeView.checkMark), and a masqueraded
// connection's first packet carries 0x20 (never 0x4000) until the plane's
// masquerade rule in nat postrouting (priority 100 on every plane) clears
// it: a probe chain of the test's own just before it (postrouting, priority
// 99) counts packets by mark. A pod's connection, not masqueraded, carries
// no mark.
func TestMasqueradeBit(t *testing.T) {
	c := newCluster(t)
	server := c.addPod("server", 12)
	pod := c.addPod("client-pod", 11)
	svc := newService("web", []string{"10.96.0.61"}, tcpPort(80))
	c.apply(svc, v4(svc, local(server)))
	c.startProxy("--masquerade-bit", "5")

	if err := c.plane().checkMark(0x20); err != nil {
		t.Fatal(err)
	}
	load := c.node.Command("nft", "-f", "-")
	load.Stdin = strings.NewReader(`table ip probe {
	chain post {
		type filter hook postrouting priority 99; policy accept;
		ip daddr ` + server.ip.String() + ` tcp dport 8080 meta mark & 0x00000020 == 0x00000020 counter comment "bit5"
		ip daddr ` + server.ip.String() + ` tcp dport 8080 meta mark & 0x00004000 == 0x00004000 counter comment "bit14"
	}
}
`)
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("probe table: %v\n%s", err, out)
	}
	counts := func() (bit5, bit14 int) {
		t.Helper()
		out := c.mustNode("nft", "list", "chain", "ip", "probe", "post")
		for _, m := range regexp.MustCompile(`counter packets (\d+) bytes \d+ comment "(bit5|bit14)"`).FindAllStringSubmatch(out, -1) {
			n, _ := strconv.Atoi(m[1])
			if m[2] == "bit5" {
				bit5 = n
			} else {
				bit14 = n
			}
		}
		return bit5, bit14
	}

	if r, err := tcpReq(pod.ns, "10.96.0.61:80", reqTimeout); err != nil || r.Src != pod.ip {
		t.Fatalf("pod to the ClusterIP: %v %v, want seen as %s", r, err, pod.ip)
	}
	if b5, b14 := counts(); b5 != 0 || b14 != 0 {
		t.Fatalf("after a pod's connection: %d packets marked 0x20, %d marked 0x4000; want none", b5, b14)
	}
	const conns = 3
	for i := range conns {
		if r, err := tcpReq(c.client, "10.96.0.61:80", reqTimeout); err != nil || r.Src != podGateway {
			t.Fatalf("client connection %d to the ClusterIP: %v %v, want masqueraded to %s", i, r, err, podGateway)
		}
	}
	// Only a connection's first packet crosses the nat chains that mark it.
	if b5, b14 := counts(); b5 != conns || b14 != 0 {
		t.Fatalf("after %d masqueraded connections: %d packets marked 0x20, %d marked 0x4000; want %d and 0", conns, b5, b14, conns)
	}
}

// TestConntrackSysctlsAndConfigWarnings runs the proxy in the node namespace
// with kube-proxy's conntrack defaults, one timeout from the --config file,
// one from a flag, and a table size it must try to write: the per-namespace
// sysctls are written there, the read-only nf_conntrack_max costs one
// warning line and no failure, and the file's fields that svcnet does not
// honour are each named in a warning.
func TestConntrackSysctlsAndConfigWarnings(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	svc := newService("web", []string{"10.96.0.62"}, tcpPort(80))
	c.apply(svc, v4(svc, local(a)))
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
conntrack:
  tcpCloseWaitTimeout: 2h
ipvs:
  scheduler: rr
oomScoreAdj: -999
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// nf_conntrack_max is asked one value above the host's, so that it
	// must be written (and cannot be) on any machine.
	hostMax, err := strconv.Atoi(strings.TrimSpace(c.mustNode("cat", "/proc/sys/net/netfilter/nf_conntrack_max")))
	if err != nil {
		t.Fatal(err)
	}
	p := c.startProxy("--config", cfg, "--conntrack-udp-timeout", "45s",
		"--conntrack-max-per-core", "1", "--conntrack-min", strconv.Itoa(hostMax+1))
	for name, want := range map[string]string{
		"nf_conntrack_tcp_timeout_established": "86400", // kube-proxy's default, 24h
		"nf_conntrack_tcp_timeout_close_wait":  "7200",  // the file's 2h
		"nf_conntrack_udp_timeout":             "45",    // the flag's
	} {
		if got := strings.TrimSpace(c.mustNode("cat", "/proc/sys/net/netfilter/"+name)); got != want {
			t.Errorf("%s in the node namespace = %s, want %s", name, got, want)
		}
	}
	log := p.log.String()
	for _, re := range []string{
		fmt.Sprintf(`(?m)^W.*\] conntrack: nf_conntrack_max not set to %d \(maxPerCore 1 × \d+ CPUs is below min %d\): read-only here .*; it stays %d$`, hostMax+1, hostMax+1, hostMax),
		`(?m)^W.*\] --config ` + regexp.QuoteMeta(cfg) + `: ipvs.scheduler: svcnet programs nftables, not IPVS; ignored$`,
		`(?m)^W.*\] --config ` + regexp.QuoteMeta(cfg) + `: oomScoreAdj: svcnet proxy keeps the OOM score it was started with`,
	} {
		if !regexp.MustCompile(re).MatchString(log) {
			t.Errorf("proxy log lacks %s", re)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^W\d{4} `).FindAllString(log, -1)); n != 3 {
		t.Errorf("%d warning lines, want 3:\n%s", n, log)
	}
	eventuallyAnswered(t, a.ns, "tcp", "10.96.0.62:80", a.name)
	if !p.running() {
		t.Fatalf("svcnet proxy exited: %s", p.describe())
	}
}

package proxy_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestEgressMasquerade sends real connections from a pod to a server
// outside the cluster (the client namespace, 172.26.236.10 and
// fd00:26:236::10, beyond the node and in no cluster CIDR) and to other
// pods, and checks the source each server sees, under each egress
// masquerade setting:
//
//   - default (on, with --cluster-cidr): the outside server sees the node's
//     address of the family, over TCP and UDP;
//   - pod to pod, directly or through a ClusterIP: the pod's own address;
//   - --egress-masquerade=false: the outside server sees the pod;
//   - a non-masquerade CIDR (the flag for the node network, the --config
//     section for its IPv6 one): the pod's address to it, the node's to
//     the other family.
//
// The client's default route is the node, so replies to a pod's address
// come back without masquerade too: what the server sees is what tells.
func TestEgressMasquerade(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	startEcho(t, &pod{name: "outside", ns: c.client, ip: clientIP, ip6: clientIP6})
	svc := newService("web", []string{"10.96.0.70"}, tcpPort(80))
	c.apply(svc, v4(svc, local(b)))
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(cfg, []byte("egressMasquerade:\n  nonMasqueradeCIDRs: [\"fd00:26:236::/64\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	type check struct {
		name, proto, to string
		from            *pod
		want            netip.Addr
		by              string // who answers
	}
	outside4 := hostPort(clientIP, echoPort)
	outside6 := hostPort(clientIP6, echoPort)
	for _, run := range []struct {
		name  string
		args  []string
		chain bool // the plane's IPv4 egress masquerade masquerades
		want  []check
	}{
		{"default", nil, true, []check{
			{"outside/tcp", "tcp", outside4, a, nodeIP, "outside"},
			{"outside/udp", "udp", outside4, a, nodeIP, "outside"},
			{"outside6/tcp", "tcp", outside6, a, nodeIP6, "outside"},
			{"outside6/udp", "udp", outside6, a, nodeIP6, "outside"},
			{"pod/tcp", "tcp", hostPort(b.ip, echoPort), a, a.ip, b.name},
			{"pod6/tcp", "tcp", hostPort(b.ip6, echoPort), a, a.ip6, b.name},
			{"ClusterIP/tcp", "tcp", "10.96.0.70:80", a, a.ip, b.name},
		}},
		{"off", []string{"--egress-masquerade=false"}, false, []check{
			{"outside/tcp", "tcp", outside4, a, a.ip, "outside"},
			{"outside6/tcp", "tcp", outside6, a, a.ip6, "outside"},
			{"pod/tcp", "tcp", hostPort(b.ip, echoPort), a, a.ip, b.name},
		}},
		{"non-masquerade flag", []string{"--non-masquerade-cidrs", "172.26.236.0/24"}, true, []check{
			{"outside/tcp", "tcp", outside4, a, a.ip, "outside"},
			{"outside6/tcp", "tcp", outside6, a, nodeIP6, "outside"},
			{"pod/tcp", "tcp", hostPort(b.ip, echoPort), a, a.ip, b.name},
		}},
		{"non-masquerade config file", []string{"--config", cfg}, true, []check{
			{"outside/tcp", "tcp", outside4, a, nodeIP, "outside"},
			{"outside6/tcp", "tcp", outside6, a, a.ip6, "outside"},
		}},
	} {
		t.Run(run.name, func(t *testing.T) {
			p := c.startProxy(run.args...)
			defer func() {
				if err := p.stop(t, syscall.SIGTERM); err != nil {
					t.Errorf("svcnet proxy exit: %v", err)
				}
			}()
			if has, out := c.plane().egressMasquerade(); has != run.chain {
				t.Fatalf("egress chain in the kernel: %v, want %v:\n%s", has, run.chain, out)
			}
			for _, ck := range run.want {
				t.Run(ck.name, func(t *testing.T) {
					r, err := req(ck.from.ns, ck.proto, ck.to, reqTimeout)
					if err != nil {
						t.Fatalf("%s from %s to %s: %v", ck.proto, ck.from.name, ck.to, err)
					}
					if r.Pod != ck.by || r.Src != ck.want {
						t.Errorf("%s from %s to %s: %s saw %s, want %s seeing %s", ck.proto, ck.from.name, ck.to, r.Pod, r.Src, ck.by, ck.want)
					}
				})
			}
		})
	}
}

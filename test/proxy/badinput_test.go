package proxy_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestBadServiceSkipped: a Service the node cannot program is reported in the
// log by name and skipped; every other Service keeps working.
func TestBadServiceSkipped(t *testing.T) {
	t.Run("externalIP-is-another-clusterIP", func(t *testing.T) {
		// The API (and the embedded control plane) accept this; the node must
		// not let "thief" capture "good"'s ClusterIP (CVE-2020-8554).
		c := newCluster(t)
		a, b, d := c.addPod("pod-a", 11), c.addPod("pod-b", 12), c.addPod("pod-d", 13)
		client := c.addPod("client", 20)
		good := newService("good", []string{"10.96.0.180"}, tcpPort(80))
		thief := newService("thief", []string{"10.96.0.181"}, tcpPort(80))
		thief.Spec.ExternalIPs = []string{"10.96.0.180"}
		other := newService("other", []string{"10.96.0.182"}, tcpPort(80))
		c.apply(good, v4(good, local(a)), thief, v4(thief, local(b)), other, v4(other, local(d)))
		proxy := c.startProxy()

		proxy.waitLog(t, 5*time.Second, 0, regexp.MustCompile(`"Service skipped on this node".*default/thief.*10\.96\.0\.180`))
		if seen := byPod(requests(t, client.ns, "tcp", "10.96.0.180:80", 10)); seen[a.name] != 10 {
			t.Errorf("good's ClusterIP reached %v, want only %s", seen, a.name)
		}
		eventuallyAnswered(t, client.ns, "tcp", "10.96.0.182:80", d.name)
	})

	t.Run("nodePort-clash", func(t *testing.T) {
		// The control plane, as kube-apiserver, refuses the second claim of a
		// node port: the source logs the refused Service and serves the rest.
		c := newCluster(t)
		a, b, d := c.addPod("pod-a", 11), c.addPod("pod-b", 12), c.addPod("pod-d", 13)
		client := c.addPod("client", 20)
		np1 := newService("np1", []string{"10.96.0.185"}, tcpPort(80))
		np2 := newService("np2", []string{"10.96.0.186"}, tcpPort(80))
		for _, s := range []*corev1.Service{np1, np2} {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30090
		}
		other := newService("other", []string{"10.96.0.187"}, tcpPort(80))
		c.apply(np1, v4(np1, local(a)), np2, v4(np2, local(b)), other, v4(other, local(d)))
		proxy := c.startProxy()

		i := proxy.waitLog(t, 5*time.Second, 0, regexp.MustCompile(`default/np[12].*30090|30090.*default/np[12]`))
		line := proxy.lines()[i]
		loser, winner := "np2", a.name
		if strings.Contains(line, "default/np1") {
			loser, winner = "np1", b.name
		}
		t.Logf("refused: %s (%s)", loser, line)
		if seen := byPod(requests(t, c.client, "tcp", hostPort(nodeIP, 30090), 10)); seen[winner] != 10 {
			t.Errorf("NodePort 30090 reached %v, want only %s (the Service that kept it)", seen, winner)
		}
		eventuallyAnswered(t, client.ns, "tcp", "10.96.0.187:80", d.name)
	})
}

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// speakersTimeout bounds WaitSpeakers: a speaker's warm-up is three
// heartbeat timeouts (1.2 s by default) after its proxy synced.
const speakersTimeout = 30 * time.Second

// The svcnet proxy's speaker gauges WaitSpeakers reads.
const (
	speakerReadyMetric = "svcnet_proxy_speaker_ready"
	speakerPeersMetric = "svcnet_proxy_speaker_peers_alive"
)

// WaitSpeakers waits until every node's layer-2 speaker has ended its
// warm-up and counts every other node alive and ready (its svcnet proxy's
// svcnet_proxy_speaker_ready and svcnet_proxy_speaker_peers_alive), bounded
// by speakersTimeout. Until then a LoadBalancer IP moves as the speakers
// become ready one by one, and the gratuitous ARP of a node that held it for
// a moment can keep the client on that node for the kernel's ARP locktime
// (1 s): a lab is up once its IPs stay with the owner they will keep. A lab
// whose svcnet proxies export no metrics (--metrics-bind-address "" among
// its proxy arguments) is not waited for.
func (c *Cluster) WaitSpeakers(ctx context.Context) error {
	addr, ok := c.proxyMetricsAddr()
	if !ok {
		return nil
	}
	deadline := time.Now().Add(speakersTimeout)
	for i := 1; i <= c.Info.Nodes; i++ {
		if err := c.waitSpeaker(ctx, i, "http://"+addr+"/metrics", deadline); err != nil {
			return err
		}
	}
	return nil
}

// waitSpeaker waits until node i's speaker is ready and counts the other
// nodes alive, or deadline.
func (c *Cluster) waitSpeaker(ctx context.Context, i int, url string, deadline time.Time) error {
	ns, err := netns.Open(c.Names.Node(i))
	if err != nil {
		return err
	}
	defer ns.Close()
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns)}, Timeout: 2 * time.Second}
	for {
		body, err := getOK(hc, url, 16<<20)
		if err == nil {
			err = speakerSettled(string(body), c.Info.Nodes-1)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: layer-2 speaker not settled after %v: %w", topology.NodeName(i), speakersTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// speakerSettled checks Prometheus text for a ready speaker counting peers
// other nodes alive.
func speakerSettled(text string, peers int) error {
	ready, alive := -1.0, -1.0
	for _, line := range strings.Split(text, "\n") {
		for name, v := range map[string]*float64{speakerReadyMetric: &ready, speakerPeersMetric: &alive} {
			if s, ok := strings.CutPrefix(line, name+" "); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
					*v = f
				}
			}
		}
	}
	switch {
	case ready != 1:
		return fmt.Errorf("%s is %v, want 1 (warming up)", speakerReadyMetric, ready)
	case alive != float64(peers):
		return fmt.Errorf("%s is %v, want %d", speakerPeersMetric, alive, peers)
	}
	return nil
}

// proxyMetricsAddr is where node svcnet proxies serve /metrics (inside each
// node's namespace); false when their arguments turn it off.
func (c *Cluster) proxyMetricsAddr() (string, bool) {
	addr := "127.0.0.1:10249" // svcnet proxy's default, as kube-proxy's
	if kubeProxyMode(c.Info.Proxy) != "" {
		addr = helperMetricsAddr
	}
	args := c.Info.ProxyArgs
	for k, a := range args {
		switch {
		case a == "--metrics-bind-address" && k+1 < len(args):
			addr = args[k+1]
		case strings.HasPrefix(a, "--metrics-bind-address="):
			addr = strings.TrimPrefix(a, "--metrics-bind-address=")
		}
	}
	return addr, addr != ""
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/lb/announce"
	"github.com/svcnet/svcnet/internal/lb/members"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/speaker"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/proxy/metrics"
)

// announceOptions are the flags of the layer-2 speaker inside svcnet proxy.
type announceOptions struct {
	mode         string
	iface        string
	port         int
	interval     time.Duration
	timeout      time.Duration
	window       time.Duration
	keyFile      string
	insecure     bool
	class        string
	defaultClass bool

	// keys are the heartbeat keys read from keyFile by loadKeys.
	keys *members.Keyring
}

func (a *announceOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&a.mode, "announce", "", `announce LoadBalancer IPs: "l2" answers ARP/NDP for the IPs this node owns ("" disables)`)
	fs.StringVar(&a.iface, "announce-interface", "", "the node-network interface to announce on (default: the one holding the node's InternalIP)")
	fs.IntVar(&a.port, "announce-port", members.DefaultPort, "UDP port of the speakers' heartbeats on the node network")
	fs.DurationVar(&a.interval, "announce-heartbeat-interval", members.DefaultInterval, "how often each speaker tells every peer it is alive")
	fs.DurationVar(&a.timeout, "announce-heartbeat-timeout", members.DefaultTimeout, "a peer not heard from for this long is dead and loses its IPs (at least 3 intervals)")
	fs.DurationVar(&a.window, "announce-heartbeat-window", members.DefaultStampWindow, "a heartbeat whose timestamp is further than this from this node's clock, either way, is refused as a replay (node clocks must agree within it)")
	fs.StringVar(&a.keyFile, "announce-key-file", "", "file of the keys every speaker signs and verifies heartbeats with (HMAC-SHA256): one a line, base64 or hex, at least 16 bytes; the first signs, all verify; re-read every 2s, so keys rotate without a restart. Required with --announce l2 unless --announce-insecure")
	fs.BoolVar(&a.insecure, "announce-insecure", false, "run the layer-2 speaker without a heartbeat key: heartbeats are unsigned, and any host on the node network can forge them to move LoadBalancer IPs")
	fs.StringVar(&a.class, "lb-class", plan.DefaultClass, "the loadBalancerClass whose IPs are announced")
	fs.BoolVar(&a.defaultClass, "lb-default-class", true, "also announce the IPs of LoadBalancer Services without a loadBalancerClass")
}

func (a *announceOptions) validate() error {
	switch a.mode {
	case "", "l2":
	default:
		return fmt.Errorf("--announce %q: want l2 or nothing", a.mode)
	}
	if a.port < 1 || a.port > 65535 {
		return fmt.Errorf("--announce-port %d: want 1 to 65535", a.port)
	}
	if a.interval <= 0 || a.timeout < 3*a.interval {
		return fmt.Errorf("--announce-heartbeat-timeout %s: want at least 3 × --announce-heartbeat-interval (%s)", a.timeout, a.interval)
	}
	if a.window <= 0 {
		return fmt.Errorf("--announce-heartbeat-window %s: want a positive duration", a.window)
	}
	switch {
	case a.mode != "l2" && (a.keyFile != "" || a.insecure):
		return errors.New("--announce-key-file and --announce-insecure configure the layer-2 speaker: give --announce l2 too")
	case a.keyFile != "" && a.insecure:
		return errors.New("--announce-key-file and --announce-insecure: give one, not both")
	case a.mode == "l2" && a.keyFile == "" && !a.insecure:
		return errors.New("--announce l2: no heartbeat key: give --announce-key-file FILE, a file of the secret keys " +
			"every node's speaker signs its heartbeats with (deploy/proxy/README.md makes it a Secret), " +
			"or --announce-insecure to run without one and let any host on the node network move LoadBalancer IPs")
	}
	return nil
}

// loadKeys reads --announce-key-file, so that a missing or bad file stops
// svcnet proxy before it starts anything.
func (a *announceOptions) loadKeys() error {
	if a.mode != "l2" || a.keyFile == "" {
		return nil
	}
	keys, err := members.ReadKeyFile(a.keyFile)
	if err != nil {
		return fmt.Errorf("--announce-key-file: %w", err)
	}
	a.keys = keys
	return nil
}

// runSpeaker runs the layer-2 speaker until ctx ends: it waits until the source
// has synced and knows this node, opens the announcer on the node-network
// interface and the heartbeat socket, then runs members (and the reload of its
// key file), announcer and speaker. Refused heartbeats are counted in rejected
// (by reason).
func (a *announceOptions) runSpeaker(ctx context.Context, store *model.Store, node string, met *metrics.Metrics, log klog.Logger) error {
	rejected := met.SpeakerHeartbeatsRejectedTotal
	log = log.WithName("speaker")
	n, err := waitNode(ctx, store, node)
	if err != nil {
		return err
	}
	ifname := a.iface
	if ifname == "" {
		if ifname, err = interfaceOf(n.IPs()); err != nil {
			return fmt.Errorf("--announce l2: node %s: %w (give --announce-interface)", node, err)
		}
	}
	ann, err := announce.New(announce.Config{Interface: ifname, Logger: log.WithName("l2")})
	if err != nil {
		return fmt.Errorf("--announce l2: %w", err)
	}
	// Run closes the announcer's sockets; until it runs, they are ours to close.
	running := false
	defer func() {
		if !running {
			ann.Close()
		}
	}()
	m, err := members.New(members.Config{NodeName: node, Port: a.port, Interval: a.interval, Timeout: a.timeout, Logger: log.WithName("members"),
		Keys: a.keys, Insecure: a.insecure, StampWindow: a.window,
		Rejected: func(reason string) { rejected.WithLabelValues(reason).Inc() }})
	if err != nil {
		return err
	}
	sp, err := speaker.New(speaker.Config{NodeName: node, Class: a.class, IsDefault: a.defaultClass,
		Announcer: ann, Members: m, Logger: log})
	if err != nil {
		return err
	}
	conn, err := net.ListenPacket("udp", net.JoinHostPort("", strconv.Itoa(a.port)))
	if err != nil {
		return fmt.Errorf("--announce l2: heartbeat socket: %w", err)
	}
	defer conn.Close()
	running = true
	if a.insecure {
		log.Info("WARNING: heartbeats are unsigned (--announce-insecure): any host that can reach this node's heartbeat port can move LoadBalancer IPs")
	}
	log.Info("Announcing LoadBalancer IPs", "interface", ifname, "heartbeatPort", a.port, "interval", a.interval, "timeout", a.timeout,
		"signed", !a.insecure, "keyFile", a.keyFile, "keys", keyIDs(a.keys))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ann.Run(gctx) })
	g.Go(func() error { return m.Run(gctx, conn) })
	if a.keys != nil {
		g.Go(func() error { return m.WatchKeyFile(gctx, a.keyFile, members.DefaultKeyFilePoll) })
	}
	g.Go(func() error { return sp.Run(gctx, store) })
	g.Go(func() error { exportSpeaker(gctx, m, met, a.interval); return nil })
	return g.Wait()
}

// exportSpeaker keeps the speaker's gauges (ready, peers alive) current,
// reading m every interval until ctx ends.
func exportSpeaker(ctx context.Context, m *members.Members, met *metrics.Metrics, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ready := 0.0
		if m.Ready() {
			ready = 1
		}
		met.SpeakerReady.Set(ready)
		met.SpeakerPeersAlive.Set(float64(len(m.Alive()) - 1))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// keyIDs names keys for a log line: their IDs, the signing one first; none
// when insecure.
func keyIDs(keys *members.Keyring) []string {
	if keys == nil {
		return nil
	}
	return keys.IDs()
}

// waitNode waits until the store has synced and holds the Node named node.
func waitNode(ctx context.Context, store *model.Store, node string) (*model.Node, error) {
	sub := store.Subscribe()
	defer sub.Close()
	for {
		if snap := store.Snapshot(); snap.Synced {
			if n := snap.Node(node); n != nil && len(n.IPs()) > 0 {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-sub.C():
			sub.Next()
		}
	}
}

// interfaceOf returns the name of the interface holding one of ips.
func interfaceOf(ips []netip.Addr) (string, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", fmt.Errorf("list addresses: %w", err)
	}
	for _, ip := range ips {
		for _, ad := range addrs {
			if a, ok := netip.AddrFromSlice(ad.IP); ok && a.Unmap() == ip {
				l, err := netlink.LinkByIndex(ad.LinkIndex)
				if err != nil {
					return "", fmt.Errorf("link of %s: %w", ip, err)
				}
				return l.Attrs().Name, nil
			}
		}
	}
	return "", fmt.Errorf("no interface holds the node's addresses %v", ips)
}

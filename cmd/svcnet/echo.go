package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/echo"
)

func newEchoCommand() *cobra.Command {
	var (
		cfg       echo.Config
		podIP     string
		verbosity int
	)
	cmd := &cobra.Command{
		Use:   "echo",
		Short: "Serve as a lab pod: HTTP and line-protocol echo on TCP, echo on UDP",
		Long: `svcnet echo is the server every lab pod runs (like agnhost netexec). On every
--tcp port it answers HTTP (GET / gives one JSON line naming pod, node, podIP,
client and server address; /hostname, /clientip, /readyz, /healthz) or, when
the first bytes are no HTTP request, a line protocol ("hostname", "clientip",
"echo X"; anything else is echoed back). Every --udp datagram is answered
the same way from the socket it arrived on. It stops on SIGTERM or SIGINT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if podIP != "" {
				ip, err := netip.ParseAddr(podIP)
				if err != nil {
					return fmt.Errorf("echo: --pod-ip %q: %w", podIP, err)
				}
				cfg.PodIP = ip
			}
			if len(cfg.TCP) == 0 && len(cfg.UDP) == 0 {
				return fmt.Errorf("echo: give at least one --tcp or --udp port")
			}
			setVerbosity(verbosity)
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return echo.Serve(ctx, cfg, klog.Background().WithName("echo"))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Name, "name", "", "pod name (default: $HOSTNAME, else the host name)")
	fs.StringVar(&cfg.Node, "node", "", "node name (informational)")
	fs.StringVar(&podIP, "pod-ip", "", "pod IP to report (default: the first non-loopback address)")
	fs.IntSliceVar(&cfg.TCP, "tcp", nil, "TCP port to serve (repeatable)")
	fs.IntSliceVar(&cfg.UDP, "udp", nil, "UDP port to serve (repeatable)")
	fs.IntVarP(&verbosity, "v", "v", 0, "log verbosity (1: one line per connection)")
	return cmd
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/source/file"
	"github.com/svcnet/svcnet/internal/source/kube"
	"github.com/svcnet/svcnet/internal/trace"
	"github.com/svcnet/svcnet/internal/trace/diagram"
)

// traceFlags are the flags `svcnet trace` and `svcnet lab trace` share.
type traceFlags struct {
	proto    string
	node     string
	output   string
	rules    string
	verify   bool
	verbose  bool
	ipv6     bool
	endpoint string
	svg      string
}

func (f *traceFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.proto, "proto", "", "tcp, udp or sctp (default: the Service port's protocol, else tcp)")
	fs.StringVar(&f.node, "node", "", "the node that receives a packet from outside for an address that is not a node's (LB IP, externalIP); for a Service traced from outside, the node whose NodePort is used")
	fs.StringVarP(&f.output, "output", "o", "text", "text, json, svg or mermaid")
	fs.StringVar(&f.rules, "rules", trace.RulesAuto, "where each node's ruleset comes from: auto (the kernel where the node's namespace is known, else rendered), kernel, rendered")
	fs.BoolVar(&f.verify, "verify", false, "send a real probe with nftrace set and check that the kernel took the same chains, rules and rewrites; exit non-zero on any difference")
	fs.BoolVar(&f.verbose, "verbose", false, "also show the rules that did not match")
	fs.BoolVarP(&f.ipv6, "ipv6", "6", false, "trace the IPv6 side of dual-stack places and Services")
	fs.StringVar(&f.endpoint, "endpoint", "", "follow the endpoint choice that goes to this IP:port (default: the first candidate)")
	fs.StringVar(&f.svg, "svg", "", "also write the SVG diagram to this file")
}

func (f *traceFlags) validate() error {
	switch f.output {
	case "text", "json", "svg", "mermaid":
	default:
		return fmt.Errorf("--output %q: want text, json, svg or mermaid", f.output)
	}
	return nil
}

func (f *traceFlags) options() (trace.Options, error) {
	o := trace.Options{Rules: f.rules, Verbose: f.verbose}
	if f.endpoint != "" {
		ep, err := netip.ParseAddrPort(f.endpoint)
		if err != nil {
			return o, fmt.Errorf("--endpoint %q: want IP:PORT", f.endpoint)
		}
		o.Endpoint = ep
	}
	return o, nil
}

func (f *traceFlags) ask(from, to string) trace.Ask {
	return trace.Ask{From: from, To: to, Proto: f.proto, Node: f.node, IPv6: f.ipv6}
}

// writeTrace prints tr in the chosen format, and the SVG to --svg when given.
func (f *traceFlags) write(w io.Writer, tr *trace.Trace) error {
	if f.svg != "" {
		if err := os.WriteFile(f.svg, diagram.SVG(tr), 0o644); err != nil {
			return fmt.Errorf("--svg: %w", err)
		}
	}
	switch f.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(tr)
	case "svg":
		_, err := w.Write(diagram.SVG(tr))
		return err
	case "mermaid":
		_, err := io.WriteString(w, diagram.Mermaid(tr))
		return err
	}
	return trace.WriteText(w, tr)
}

func newTraceCommand() *cobra.Command {
	var (
		src    stateFlags
		f      traceFlags
		from   string
		to     string
		netnss []string
		cgs    []string
		cidrs  []string
		egress egressOptions
		plane  string
	)
	cmd := &cobra.Command{
		Use:   "trace --from SRC --to DST",
		Short: "Show every hop, chain, rule and rewrite one packet meets, and its way back",
		Long: `svcnet trace follows the first packet of a connection from SRC to DST through the
cluster: each node's netfilter hooks, the chains and rules that decided something,
every DNAT and SNAT as a before ⇒ after tuple, the endpoint choice with each
candidate's probability, routing between nodes and pods, and the reply's way back
through conntrack. Verdicts other than delivery are explained.

SRC: a pod (NS/NAME or NAME in default), a node, an external host's name, or
IP[:PORT]. DST: a Service (NS/NAME[:PORT]), IP:PORT (ClusterIP, LoadBalancer IP,
externalIP, pod IP), NODE:NODEPORT, or a pod (NS/NAME[:PORT]). Without a source
port an ephemeral one is picked, as the kernel would.

Node rulesets are read back from the kernel where the node's network namespace is
known (--netns NODE=NETNS; the lab names them all: see svcnet lab trace), and
rendered from the cluster state as svcnet proxy renders them elsewhere, with
svcnet proxy's settings as given here (--cluster-cidr, --egress-masquerade,
--non-masquerade-cidrs, --masquerade-link-local; the Service CIDRs from
--service-cluster-ip-range with --state or when given). --data-plane names the
data plane svcnet proxy runs on the nodes: with iptables, kube-proxy's chains
are read back with iptables-save (of the variant the node uses) and explained
rule by rule; with ebpf, a connect from a pod or node to a Service frontend is
shown translated at the sender by the socket load balancer, and --verify reads
its maps from the cgroup it is attached to (--cgroup NODE=PATH, else the one of
the svcnet proxy running in the node's network namespace).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := src.validate(); err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			if from == "" || to == "" {
				return fmt.Errorf("--from and --to are required")
			}
			ctx, cancel := signalContext(cmd)
			defer cancel()
			snap, err := loadSnapshot(ctx, src, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			nsOf := map[string]string{}
			for _, kv := range netnss {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" || v == "" {
					return fmt.Errorf("--netns %q: want PLACE=NETNS (a node, NS/POD or an external name)", kv)
				}
				nsOf[k] = v
			}
			net := trace.NetworkFrom(snap, nil, nil, nsOf)
			for _, kv := range cgs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" || v == "" {
					return fmt.Errorf("--cgroup %q: want NODE=PATH", kv)
				}
				if net.Cgroups == nil {
					net.Cgroups = map[string]string{}
				}
				net.Cgroups[k] = v
			}
			opts, err := f.options()
			if err != nil {
				return err
			}
			for _, c := range cidrs {
				p, err := netip.ParsePrefix(c)
				if err != nil {
					return fmt.Errorf("--cluster-cidr %q: %w", c, err)
				}
				opts.ClusterCIDRs = append(opts.ClusterCIDRs, p.Masked())
			}
			if err := egress.traceOptions(&opts, src, cmd.Flags()); err != nil {
				return err
			}
			opts.DataPlane = plane
			return runTrace(ctx, cmd.OutOrStdout(), snap, net, f, f.ask(from, to), opts)
		},
	}
	src.bind(cmd.Flags())
	f.bind(cmd.Flags())
	cmd.Flags().StringVar(&from, "from", "", "the sender: a pod, a node, an external host or IP[:PORT]")
	cmd.Flags().StringVar(&to, "to", "", "the destination: a Service, IP:PORT, NODE:NODEPORT or a pod")
	cmd.Flags().StringArrayVar(&netnss, "netns", nil, "PLACE=NETNS: the network namespace of a node (its kernel rules are read there) or of a sender (for --verify); repeatable")
	cmd.Flags().StringArrayVar(&cgs, "cgroup", nil, "NODE=PATH: with --data-plane ebpf and --verify, the cgroup v2 path the node's socket load balancer is attached to (its svcnet proxy --cgroup, e.g. /kubepods; default: read from the node's running svcnet proxy); repeatable")
	cmd.Flags().StringVar(&plane, "data-plane", trace.DefaultPlane, "the nodes' svcnet proxy --data-plane, whose rules are rendered, read back and verified ("+strings.Join(trace.PlaneNames(), ", ")+")")
	cmd.Flags().StringSliceVar(&cidrs, "cluster-cidr", nil, "pod network CIDRs, for rendered rulesets (as svcnet proxy --cluster-cidr; default: the nodes' pod CIDRs)")
	egress.bind(cmd.Flags())
	return cmd
}

// runTrace traces, verifies when asked, and prints.
func runTrace(ctx context.Context, w io.Writer, snap *model.Snapshot, net *trace.Network, f traceFlags, ask trace.Ask, opts trace.Options) error {
	if !f.verify {
		tr, err := trace.Run(ctx, snap, net, ask, opts)
		if err != nil {
			return err
		}
		return f.write(w, tr)
	}
	rep, err := trace.Verify(ctx, snap, net, ask, opts)
	if err != nil {
		return err
	}
	if err := f.write(w, rep.Trace); err != nil {
		return err
	}
	if f.output == "text" || f.output == "json" {
		fmt.Fprint(w, "\n")
		if err := rep.Write(w); err != nil {
			return err
		}
	}
	if !rep.OK() {
		return fmt.Errorf("verify: the kernel did not take the traced path (%d difference%s)", len(rep.Differences), map[bool]string{true: "", false: "s"}[len(rep.Differences) == 1])
	}
	return nil
}

// loadSnapshot reads the cluster state from manifests or an API server;
// manifest objects the control plane left out are reported to stderr.
func loadSnapshot(ctx context.Context, src stateFlags, stderr io.Writer) (*model.Snapshot, error) {
	if src.state != "" {
		cfg, err := src.controlPlaneConfig()
		if err != nil {
			return nil, err
		}
		l, err := file.Load(file.Options{Path: src.state, Config: cfg, ReadOnly: true})
		if err != nil {
			return nil, err
		}
		for _, e := range l.Errors {
			fmt.Fprintf(stderr, "warning: %v\n", e)
		}
		return l.Snapshot(), nil
	}
	client, err := kube.NewClient(src.kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := kube.List(ctx, client, "", "services", "endpointslices", "nodes", "pods")
	if err != nil {
		return nil, err
	}
	return file.FromResult(*res, "").Snapshot(), nil
}

// labTraceCommand is `svcnet lab trace FROM TO`: the tracer over the lab, with
// every node's rules read back from its kernel, and --verify at hand.
func labTraceCommand(name *string) *cobra.Command {
	var f traceFlags
	cmd := &cobra.Command{
		Use:   "trace FROM TO",
		Short: "Trace one packet through the lab (see svcnet trace)",
		Long: `svcnet lab trace FROM TO is svcnet trace over the lab: FROM is client, a node
(node1...) or a pod; TO is a Service (NS/NAME[:PORT]), IP:PORT, NODE:NODEPORT or a
pod. Each node's rules are read back from its kernel, as the data plane the lab
runs programs them (svcnet lab up --data-plane); --verify sends a real probe from
FROM and checks the kernel's own trace against the simulated one.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			ctx, l, done, err := openLab(cmd, *name)
			if err != nil {
				return err
			}
			defer done()
			snap, net, err := l.TraceNetwork(ctx)
			if err != nil {
				return err
			}
			opts, err := f.options()
			if err != nil {
				return err
			}
			lo := l.TraceOptions()
			opts.ClusterCIDRs, opts.DataPlane, opts.Egress = lo.ClusterCIDRs, lo.DataPlane, lo.Egress
			return runTrace(ctx, cmd.OutOrStdout(), snap, net, f, f.ask(args[0], args[1]), opts)
		},
	}
	f.bind(cmd.Flags())
	return cmd
}

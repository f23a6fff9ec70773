package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/dataplane/planes"
	"github.com/svcnet/svcnet/internal/kubectlget"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/source/file"
)

// newLabCommand is `svcnet lab`: a whole cluster network on this machine, built
// from network namespaces (internal/lab).
func newLabCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "A multi-node cluster network on this machine, from network namespaces",
		Long: `svcnet lab builds a cluster network from Linux network namespaces: a fabric
carrying the node network 172.26.236.0/24, nodes running svcnet proxy, an external
client (172.26.236.10), and pods wired by svcnet's CNI plugin, each running svcnet
echo. Nothing is created in the host's network namespace. Needs root.`,
	}
	cmd.PersistentFlags().StringVar(&name, "name", "svcnet", "the lab's name; labs of different names stand side by side")
	cmd.AddCommand(labUpCommand(&name), labApplyCommand(&name), labDeleteCommand(&name), labGetCommand(&name), labDescribeCommand(&name),
		labExecCommand(&name), labCurlCommand(&name), labTraceCommand(&name), labDownCommand(&name),
		labSuperviseCommand(&name), labControlPlaneCommand(&name), labSocketsCommand())
	completeLab(cmd, &name)
	return cmd
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

// openLab opens the named lab (taking its lock) with a context cancelled by
// SIGINT or SIGTERM; done releases both.
func openLab(cmd *cobra.Command, name string) (context.Context, *lab.Lab, func(), error) {
	ctx, cancel := signalContext(cmd)
	l, err := lab.Open(ctx, name)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, l, func() { l.Close(); cancel() }, nil
}

func labUpCommand(name *string) *cobra.Command {
	o := lab.Options{}
	var k kubeletLabOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build the lab (a leftover lab of the same name is removed first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			if k.enabled {
				for _, f := range []string{"control-plane", "proxy", "proxy-arg", "data-plane", "ip-family"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("lab up --kubelet: --%s does not apply (the nodes run what is deployed on them)", f)
					}
				}
				return upKubeletLab(ctx, cmd.OutOrStdout(), *name, o.Nodes, o.K8sBin, k)
			}
			// A leftover cluster of real nodes of the name goes first, as a leftover lab does.
			if err := downKubeletLab(*name); err != nil {
				return err
			}
			o.Name, o.Progress = *name, cmd.OutOrStdout()
			if o.ControlPlane == cluster.ControlPlaneKube && o.K8sBin == "" {
				if o.K8sBin = os.Getenv(envK8sBin); o.K8sBin == "" {
					return fmt.Errorf("lab %s: --control-plane kube needs kube-apiserver and kube-controller-manager: give --k8s-bin DIR or set %s (`make k8s` builds them; tools/k8s/build.sh prints the directory)", o.Name, envK8sBin)
				}
			}
			l, err := lab.Up(ctx, o)
			if err != nil {
				return err
			}
			l.Close()
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Nodes, "nodes", 3, "number of nodes")
	cmd.Flags().StringVar(&o.ControlPlane, "control-plane", cluster.ControlPlaneFile, `"file" (svcnet's embedded control plane) or "kube" (real kube-apiserver and kube-controller-manager)`)
	cmd.Flags().StringVar(&o.K8sBin, "k8s-bin", "", "with --control-plane kube: directory of kube-apiserver, kube-controller-manager and kube-proxy; with --kubelet: of kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl (default $"+envK8sBin+")")
	cmd.Flags().StringVar(&o.Proxy, "proxy", cluster.ProxySvcnet, `the nodes' Service proxy: "`+cluster.ProxySvcnet+`", or upstream kube-proxy "`+cluster.ProxyKubeProxyNFTables+`" or "`+cluster.ProxyKubeProxyIPTables+`" (with --control-plane kube; svcnet proxy --data-plane none still gives each node its pod routes and layer-2 speaker)`)
	cmd.Flags().StringSliceVar(&o.ProxyArgs, "proxy-arg", nil, "extra flag for every node's svcnet proxy (repeatable)")
	cmd.Flags().StringVar(&o.IPFamily, "ip-family", topology.StackIPv4, `the lab's IP families: "`+topology.StackIPv4+`", "`+topology.StackIPv6+`" (the IP plan's fd00: ranges) or "`+topology.StackDual+`" (both, IPv4 primary: dual-stack nodes, pods and Services)`)
	_ = cmd.RegisterFlagCompletionFunc("ip-family", cobra.FixedCompletions([]string{topology.StackIPv4, topology.StackIPv6, topology.StackDual}, cobra.ShellCompDirectiveNoFileComp))
	addDataPlaneFlag(cmd, &o.DataPlane)
	k.addFlags(cmd)
	return cmd
}

func labDownCommand(name *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Remove the lab and everything it made (idempotent; also after a crash)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			// A cluster of real nodes first: it may run in the lab's namespaces.
			return errors.Join(downKubeletLab(*name), lab.Down(*name))
		},
	}
}

func labApplyCommand(name *string) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update Services, Pods, EndpointSlices, Endpoints and Namespaces, as kubectl apply",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("apply: -f FILE is required")
			}
			objs, bad, err := file.ReadManifests(path)
			if err != nil {
				return err
			}
			ctx, l, done, err := openLab(cmd, *name)
			if err != nil {
				return err
			}
			defer done()
			errs := append(bad, l.Apply(ctx, objs)...)
			for _, e := range errs {
				fmt.Fprintln(cmd.ErrOrStderr(), "error:", e)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d object(s) applied, %d rejected\n", len(objs)-len(errs)+len(bad), len(errs))
			warnings, err := l.NotServed(ctx, objs)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", w)
			}
			if len(errs) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d object(s) not applied", len(errs))}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "filename", "f", "", "manifest file or directory")
	return cmd
}

func labDeleteCommand(name *string) *cobra.Command {
	var namespace string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "Delete a Pod (gracefully), Service, EndpointSlice, Endpoints or Namespace",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := cluster.CanonicalKind(args[0])
			if err != nil {
				return err
			}
			ctx, l, done, err := openLab(cmd, *name)
			if err != nil {
				return err
			}
			defer done()
			if err := l.Delete(ctx, kind, namespace, args[1], grace); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s/%s deleted\n", kind, namespace, args[1])
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cmd.Flags().DurationVar(&grace, "grace-period", 2*time.Second, "a Pod's termination grace period: it stays serving, but not ready, this long")
	return cmd
}

func labGetCommand(name *string) *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   getUse,
		Short: "List what the lab's control plane holds, as kubectl get does",
		Long:  getArgs,
		Example: `  svcnet lab get svc
  svcnet lab get svc my-nginx -o yaml
  svcnet lab get pods -l app=web -o wide
  svcnet lab get all -A
  svcnet lab get pods -w`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defer oneShotMemory()()
			needs, err := kubectlget.Needs(args)
			if err != nil {
				return err
			}
			kinds := kindsOf(needs)
			if err := kubectlget.ValidateOutput(o.output); err != nil {
				return err
			}
			if o.watch {
				// The lab is opened for each read, so a watch holds its
				// lock only while it reads.
				ctx, cancel := signalContext(cmd)
				defer cancel()
				read := func(ctx context.Context) (*controlplane.Result, error) {
					l, err := lab.Open(ctx, *name)
					if err != nil {
						return nil, err
					}
					defer l.Close()
					return l.Get(ctx, kinds...)
				}
				return kubectlget.Watch(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), read, args, o.kubectlOptions(), watchInterval)
			}
			ctx, l, done, err := openLab(cmd, *name)
			if err != nil {
				return err
			}
			defer done()
			r, err := l.Get(ctx, kinds...)
			if err != nil {
				return err
			}
			return kubectlget.Get(cmd.OutOrStdout(), cmd.ErrOrStderr(), r, args, o.kubectlOptions())
		},
	}
	o.bindListFlags(cmd)
	return cmd
}

func labDescribeCommand(name *string) *cobra.Command {
	var f describeFlags
	cmd := &cobra.Command{
		Use:   describeUse,
		Short: "Show the lab's Services, Pods or Nodes in detail, with their events, as kubectl describe does",
		Long:  describeArgs,
		Example: `  svcnet lab describe svc my-nginx
  svcnet lab describe node node1
  svcnet lab describe pods -l app=web`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defer oneShotMemory()()
			ctx, l, done, err := openLab(cmd, *name)
			if err != nil {
				return err
			}
			defer done()
			return l.Describe(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), args, f.options(cmd))
		},
	}
	f.bind(cmd)
	return cmd
}

func labExecCommand(name *string) *cobra.Command {
	return &cobra.Command{
		Use:   "exec client|NODE|POD -- COMMAND [ARG...]",
		Short: "Run a command in the client, a node or a pod (a pod's command sees its own /etc/resolv.conf and hostname)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, l, done, err := openLab(cmd, *name)
			if err != nil {
				return err
			}
			defer done()
			p, err := l.Resolve(ctx, args[0])
			c := l.Command(p, args[1:]...)
			l.Close() // a long command must not hold the lab's lock
			if err != nil {
				return err
			}
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := c.Run(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return &exitError{code: ee.ExitCode(), err: err}
				}
				return err
			}
			return nil
		},
	}
}

func labCurlCommand(name *string) *cobra.Command {
	var count int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "curl FROM TARGET",
		Short: "HTTP GET (or a UDP datagram) from the client, a node or a pod; print which pod answered and which client address it saw",
		Long: `FROM is client, a node (node1...) or a pod (NAME or NAMESPACE/NAME).
TARGET is a URL, HOST[:PORT] (port 80 by default), or svc/NAME[:PORT] (the
Service's ClusterIP; NAMESPACE/svc/NAME for another namespace). A
udp://HOST:PORT target sends each request as one datagram "whoami" from a new
socket, which the lab's echo servers answer as GET / does.

A failed request says what it met (connection refused, no answer, reset,
unreachable), and the command ends with the lab trace that follows that
packet through the lab and compares the kernel's own trace.

A host name is resolved as FROM resolves it, from inside the lab, never by
this machine's resolver: a pod with its resolv.conf (the cluster DNS
10.96.0.10, its namespace's search path, ndots:5), a node with the cluster DNS
and namespace default's search path; the client, outside the cluster, has no
name server and takes addresses only. A name that does not resolve is an
error naming the name, the place and the resolver asked.`,
		Example: `  svcnet lab curl client-1 web-0.nginx-hl      # a headless Service's pod, by hostname
  svcnet lab curl client-1 my-nginx.default -c 10
  svcnet lab curl node1 svc/my-nginx
  svcnet lab curl client 172.26.236.180
  svcnet lab curl client-1 udp://echo-udp:5353 -c 4   # a Service's UDP port`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, l, done, err := openLab(cmd, *name)
			if err != nil {
				return err
			}
			defer done()
			from, err := l.Resolve(ctx, args[0])
			if err != nil {
				l.Close()
				return err
			}
			url, err := l.TargetURL(ctx, args[1])
			l.Close()
			if err != nil {
				return err
			}
			hits, err := l.Curl(ctx, from, url, count, timeout)
			failed := lab.PrintHits(cmd.OutOrStdout(), url, hits)
			if err != nil {
				return err
			}
			if hint := lab.TraceHint(*name, args[0], url, hits); hint != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "to see where the packet went and why: %s\n", hint)
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d request(s) failed", failed, len(hits))}
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&count, "count", "c", 1, "number of requests, each on a new connection")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "bound of each request")
	return cmd
}

// envK8sBin names the directory of the Kubernetes binaries (tools/k8s/build.sh
// prints it): the default of `lab up --k8s-bin`.
const envK8sBin = "SVCNET_K8S_BIN"

// addDataPlaneFlag adds --data-plane, the Service data plane of every node's
// svcnet proxy (lab.Options.DataPlane).
func addDataPlaneFlag(cmd *cobra.Command, dataPlane *string) {
	cmd.Flags().StringVar(dataPlane, "data-plane", "", `the Service data plane of every node's svcnet proxy, passed as its --data-plane (`+
		strings.Join(planes.Names(), ", ")+`; empty: the proxy's default; ebpf translates the connects of the node's own processes, which run in the node's cgroup)`)
}

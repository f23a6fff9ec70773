package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/describe"
	"github.com/svcnet/svcnet/internal/source/kube"
)

const (
	describeUse  = "describe TYPE [NAME... | -l SELECTOR] | TYPE/NAME..."
	describeArgs = `TYPE is services (svc), pods (po) or nodes (no). The text is kubectl describe's:
a Service's type, IPs, ports, endpoints, load-balancer status and events; a Pod's
node, IPs, containers, conditions and events; a Node's addresses, conditions,
pods, allocated resources and events. TYPE alone describes every object of the
type (-l: those the selector matches); a NAME that no object has describes the
objects whose names start with it. Events are shown for one object, not for
several (--show-events decides).`
)

// describeFlags are kubectl describe's flags.
type describeFlags struct {
	namespace     string
	allNamespaces bool
	selector      string
	showEvents    bool
}

func (f *describeFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "default", "namespace of the objects")
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "describe the objects of every namespace")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "label selector (=, ==, !=, in, notin, exists), as kubectl's")
	cmd.Flags().BoolVar(&f.showEvents, "show-events", true, "show the events of the objects described (default: for one object only)")
}

func (f *describeFlags) options(cmd *cobra.Command) describe.Options {
	o := describe.Options{Namespace: f.namespace, AllNamespaces: f.allNamespaces, Selector: f.selector, Now: time.Now()}
	if cmd.Flags().Changed("show-events") {
		o.ShowEvents = &f.showEvents
	}
	return o
}

func newDescribeCommand() *cobra.Command {
	var src stateFlags
	var f describeFlags
	cmd := &cobra.Command{
		Use:   describeUse,
		Short: "Show Services, Pods or Nodes in detail, with their events, as kubectl describe does",
		Long: "Describe objects of a cluster (--kubeconfig) or of manifests run through the embedded\n" +
			"control plane (--state; its events are those of this run).\n\n" + describeArgs,
		Example: `  svcnet describe svc my-nginx --kubeconfig ~/.kube/config
  svcnet describe svc/web --state manifests/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defer oneShotMemory()()
			if err := src.validate(); err != nil {
				return err
			}
			r, err := describeReader(&src, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return describe.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), r, args, f.options(cmd))
		},
	}
	src.bind(cmd.Flags())
	f.bind(cmd)
	completeTypes(cmd, func() []string { return describeTypes })
	return cmd
}

// describeReader reads from the cluster, or from the manifests as the
// embedded control plane holds them.
func describeReader(src *stateFlags, stderr io.Writer) (describe.Reader, error) {
	if src.state == "" {
		cfg, err := kube.RESTConfig(src.kubeconfig)
		if err != nil {
			return nil, err
		}
		c, err := kube.NewClientFor(cfg)
		if err != nil {
			return nil, err
		}
		return describe.Client{C: c}, nil
	}
	o := &getOptions{src: *src}
	r, invalid, err := o.fromManifests(stderr, nil) // describe shows endpoints and events: every kind
	if err != nil {
		return nil, err
	}
	for _, e := range invalid {
		fmt.Fprintln(stderr, "error:", e)
	}
	return describe.Held{R: r, Recorded: r.Events}, nil
}

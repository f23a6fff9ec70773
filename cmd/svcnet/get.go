package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/kubectlget"
	"github.com/svcnet/svcnet/internal/source/file"
	"github.com/svcnet/svcnet/internal/source/kube"
)

type getOptions struct {
	src           stateFlags
	namespace     string
	allNamespaces bool
	output        string
	selector      string
	fieldSelector string
	showLabels    bool
	noHeaders     bool
	sortBy        string
	watch         bool
}

// watchInterval is how often get -w reads the state again.
const watchInterval = time.Second

// getUse and getLong describe both get commands' arguments, as kubectl's.
const (
	getUse  = "get TYPE[,TYPE...] [NAME...] | TYPE/NAME... | all"
	getArgs = `TYPE is services (svc), endpoints (ep), endpointslices, pods (po), nodes
(no), events (ev) or ipaddresspools; all is pods and services. Objects are chosen by name, by -l
(a label selector, set-based too) or --field-selector (metadata.name,
metadata.namespace), and printed as kubectl prints them: its tables (-o wide,
--show-labels, --no-headers, --sort-by), or -o name, json, yaml,
jsonpath=..., jsonpath-as-json=..., custom-columns=... or go-template=...`
)

func newGetCommand() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   getUse,
		Short: "List what the control plane holds, as kubectl get does",
		Long: "List Services, EndpointSlices, Nodes, Pods or IPAddressPools from a cluster (--kubeconfig) or from\n" +
			"manifests run through the embedded control plane (--state). Invalid objects in the\n" +
			"manifests, of the kinds listed and those they depend on, are reported on stderr and\n" +
			"the command exits 1; the valid ones are printed.\n\n" + getArgs,
		Example: `  svcnet get svc --state manifests/
  svcnet get svc my-nginx -o yaml --kubeconfig ~/.kube/config
  svcnet get svc,pods -l app=web -o wide --state manifests/
  svcnet get svc -A -o jsonpath='{.items[*].spec.clusterIP}' --state manifests/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defer oneShotMemory()()
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		},
	}
	o.src.bind(cmd.Flags())
	o.bindListFlags(cmd)
	completeTypes(cmd, resourceTypes)
	return cmd
}

// bindListFlags binds kubectl's listing flags.
func (o *getOptions) bindListFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "default", "namespace to list")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list every namespace")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: wide, name, json, yaml, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE, custom-columns=SPEC, go-template=TEMPLATE")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "label selector (=, ==, !=, in, notin, exists), as kubectl's")
	cmd.Flags().StringVar(&o.fieldSelector, "field-selector", "", "field selector on metadata.name and metadata.namespace (=, ==, !=)")
	cmd.Flags().BoolVar(&o.showLabels, "show-labels", false, "show every label as the last column")
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "leave out the table's header (and custom-columns')")
	cmd.Flags().StringVar(&o.sortBy, "sort-by", "", "sort by a JSONPath expression (e.g. '{.metadata.name}')")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "after listing, print what changes (read again every second) until interrupted")
}

func (o *getOptions) kubectlOptions() kubectlget.Options {
	return kubectlget.Options{Namespace: o.namespace, AllNamespaces: o.allNamespaces, Selector: o.selector,
		FieldSelector: o.fieldSelector, Output: o.output, ShowLabels: o.showLabels, NoHeaders: o.noHeaders,
		SortBy: o.sortBy, Now: time.Now()}
}

func (o *getOptions) run(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	if err := o.src.validate(); err != nil {
		return err
	}
	needs, err := kubectlget.Needs(args)
	if err != nil {
		return err
	}
	if err := kubectlget.ValidateOutput(o.output); err != nil {
		return err
	}
	var invalid []error
	read := func(ctx context.Context) (*controlplane.Result, error) {
		if o.src.state == "" {
			return o.fromCluster(ctx, stderr, needs)
		}
		r, inv, err := o.fromManifests(stderr, needs)
		if invalid == nil {
			invalid = inv
		}
		return r, err
	}
	if o.watch {
		ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer cancel()
		return kubectlget.Watch(ctx, stdout, stderr, read, args, o.kubectlOptions(), watchInterval)
	}
	objs, err := read(ctx)
	if err != nil {
		return err
	}
	if err := kubectlget.Get(stdout, stderr, objs, args, o.kubectlOptions()); err != nil {
		return err
	}
	for _, e := range invalid {
		fmt.Fprintln(stderr, "error:", e)
	}
	if len(invalid) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d invalid object(s) in %s", len(invalid), o.src.state)}
	}
	return nil
}

// fromManifests runs the embedded control plane over the manifests of the kinds
// needs (resources) shows and those they depend on (file.KindsFor): an invalid
// object of another kind is not get's to report. It persists the allocations (so
// what get shows is what an agent on the same files will use); when the state
// file can't be written it says so and shows the allocations anyway.
func (o *getOptions) fromManifests(stderr io.Writer, needs []string) (*controlplane.Result, []error, error) {
	cfg, err := o.src.controlPlaneConfig()
	if err != nil {
		return nil, nil, err
	}
	opts := file.Options{Path: o.src.state, Config: cfg, ResultOnly: true, Kinds: file.KindsFor(kindsOf(needs)...)}
	l, err := file.Load(opts)
	if errors.Is(err, file.ErrStateWrite) {
		fmt.Fprintf(stderr, "warning: %v; allocations shown are not persisted\n", err)
		opts.ReadOnly = true
		l, err = file.Load(opts)
	}
	if err != nil {
		return nil, nil, err
	}
	res := l.API
	res.State = controlplane.State{} // persisted: get prints none of it
	return &res, l.Errors, nil
}

// kindsOf returns the kinds of resources (get's plural names); a resource
// whose objects are made from every kind (endpoints, events) is "", which
// KindsFor reads as every kind.
func kindsOf(resources []string) []string {
	kinds := map[string]string{"services": "Service", "pods": "Pod", "nodes": "Node"}
	out := make([]string, len(resources))
	for i, r := range resources {
		out[i] = kinds[r]
	}
	return out
}

// fromCluster lists what needs names from the API server; its warnings
// (a deprecated API) go to stderr as kubectl prints them.
func (o *getOptions) fromCluster(ctx context.Context, stderr io.Writer, needs []string) (*controlplane.Result, error) {
	cfg, err := kube.RESTConfig(o.src.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NewWarningWriter(stderr, rest.WarningWriterOptions{Deduplicate: true})
	client, err := kube.NewClientFor(cfg)
	if err != nil {
		return nil, err
	}
	ns := o.namespace
	if o.allNamespaces {
		ns = ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var r controlplane.Result
	var listed []string
	for _, res := range needs {
		if res != "ipaddresspools" {
			listed = append(listed, res)
			continue
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("dynamic client: %w", err)
		}
		if r.Pools, err = kube.ListPools(ctx, dyn); err != nil {
			return nil, err
		}
	}
	l, err := kube.List(ctx, client, ns, listed...)
	if err != nil {
		return nil, err
	}
	l.Pools = r.Pools
	return l, nil
}

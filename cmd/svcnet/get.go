package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/printers"
	"github.com/svcnet/svcnet/internal/source/file"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// resources maps every name `get` accepts to the canonical resource.
var resources = map[string]string{
	"services": "services", "service": "services", "svc": "services",
	"endpointslices": "endpointslices", "endpointslice": "endpointslices",
	"nodes": "nodes", "node": "nodes", "no": "nodes",
	"pods": "pods", "pod": "pods", "po": "pods",
	"ipaddresspools": "ipaddresspools", "ipaddresspool": "ipaddresspools", "svcpool": "ipaddresspools",
}

type getOptions struct {
	src           stateFlags
	namespace     string
	allNamespaces bool
	output        string
}

func newGetCommand() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get services|endpointslices|nodes|pods|ipaddresspools",
		Short: "List what the control plane holds, as kubectl get does",
		Long: "List Services, EndpointSlices, Nodes, Pods or IPAddressPools from a cluster (--kubeconfig) or from\n" +
			"manifests run through the embedded control plane (--state). Invalid objects in the\n" +
			"manifests are reported on stderr and the command exits 1; the valid ones are printed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, ok := resources[args[0]]
			if !ok {
				return fmt.Errorf("get: unknown resource type %q (want services, endpointslices, nodes, pods or ipaddresspools)", args[0])
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), res)
		},
	}
	o.src.bind(cmd.Flags())
	o.bindListFlags(cmd)
	completeGet(cmd)
	return cmd
}

// bindListFlags binds kubectl's listing flags (-n, -A, -o).
func (o *getOptions) bindListFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "default", "namespace to list")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list every namespace")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: wide, json or yaml")
}

func (o *getOptions) validateOutput() error {
	switch o.output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("get: unknown output format %q (want wide, json or yaml)", o.output)
}

func (o *getOptions) run(ctx context.Context, stdout, stderr io.Writer, resource string) error {
	if err := o.src.validate(); err != nil {
		return err
	}
	if err := o.validateOutput(); err != nil {
		return err
	}
	var objs *controlplane.Result
	var invalid []error
	var err error
	if o.src.state != "" {
		objs, invalid, err = o.fromManifests(stderr)
	} else {
		objs, err = o.fromCluster(ctx, resource)
	}
	if err != nil {
		return err
	}
	if err := o.print(stdout, stderr, resource, objs); err != nil {
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

// fromManifests runs the embedded control plane over the manifests. It persists the
// allocations (so what get shows is what an agent on the same files will use); when
// the state file can't be written it says so and shows the allocations anyway.
func (o *getOptions) fromManifests(stderr io.Writer) (*controlplane.Result, []error, error) {
	cfg, err := o.src.controlPlaneConfig()
	if err != nil {
		return nil, nil, err
	}
	opts := file.Options{Path: o.src.state, Config: cfg}
	l, err := file.Load(opts)
	if errors.Is(err, file.ErrStateWrite) {
		fmt.Fprintf(stderr, "warning: %v; allocations shown are not persisted\n", err)
		opts.ReadOnly = true
		l, err = file.Load(opts)
	}
	if err != nil {
		return nil, nil, err
	}
	return &l.API, l.Errors, nil
}

func (o *getOptions) fromCluster(ctx context.Context, resource string) (*controlplane.Result, error) {
	client, err := kube.NewClient(o.src.kubeconfig)
	if err != nil {
		return nil, err
	}
	ns := o.namespace
	if o.allNamespaces {
		ns = ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if resource == "ipaddresspools" {
		cfg, err := kube.RESTConfig(o.src.kubeconfig)
		if err != nil {
			return nil, err
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("dynamic client: %w", err)
		}
		pools, err := kube.ListPools(ctx, dyn)
		if err != nil {
			return nil, err
		}
		return &controlplane.Result{Pools: pools}, nil
	}
	return kube.List(ctx, client, ns, resource)
}

func (o *getOptions) print(w, stderr io.Writer, resource string, r *controlplane.Result) error {
	popts := printers.Options{Wide: o.output == "wide", AllNamespaces: o.allNamespaces, Now: time.Now()}
	inNS := func(m metav1.Object) bool { return o.allNamespaces || m.GetNamespace() == o.namespace }
	var items []runtime.Object
	var table func() error
	switch resource {
	case "services":
		s := filter(r.Services, inNS)
		items, table = objects(s), func() error { return printers.Services(w, s, popts) }
	case "endpointslices":
		s := filter(r.EndpointSlices, inNS)
		items, table = objects(s), func() error { return printers.EndpointSlices(w, s, popts) }
	case "nodes":
		s := r.Nodes
		items, table = objects(s), func() error { return printers.Nodes(w, s, popts) }
	case "pods":
		s := filter(r.Pods, inNS)
		items, table = objects(s), func() error { return printers.Pods(w, s, popts) }
	case "ipaddresspools":
		s := r.Pools
		items, table = objects(s), func() error { return printers.Pools(w, s, popts) }
	}
	if o.output == "json" || o.output == "yaml" {
		return printers.List(w, o.output, items)
	}
	if len(items) == 0 {
		where := " in " + o.namespace + " namespace"
		if o.allNamespaces || resource == "nodes" || resource == "ipaddresspools" {
			where = ""
		}
		fmt.Fprintf(stderr, "No resources found%s.\n", where)
		return nil
	}
	return table()
}

func filter[T metav1.Object](in []T, keep func(metav1.Object) bool) []T {
	var out []T
	for _, x := range in {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func objects[T runtime.Object](in []T) []runtime.Object {
	out := make([]runtime.Object, len(in))
	for i, x := range in {
		out[i] = x
	}
	return out
}

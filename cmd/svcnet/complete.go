package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/describe"
	"github.com/svcnet/svcnet/internal/kubectlget"
	"github.com/svcnet/svcnet/internal/lab"
)

// Shell completion (svcnet completion bash|zsh|fish, cobra's scripts, which
// ask `svcnet __complete ARGS...`): resource types, the names of a lab's
// objects, lab names and lab places. A lab is read under its lock, waited
// for at most completionWait, so a shell never hangs on a busy lab: it
// then completes nothing.

// completionWait bounds the wait for a lab's lock while completing.
const completionWait = time.Second

// noFiles is the directive of every completion here: never file names.
const noFiles = cobra.ShellCompDirectiveNoFileComp

// resourceTypes are the resource types `get` completes, as kubectl
// completes them: the plural names.
func resourceTypes() []string { return kubectlget.Resources() }

// deleteTypes are the kinds `lab delete` takes, in kubectl's singular.
var deleteTypes = []string{"endpoints", "endpointslice", "namespace", "pod", "service"}

// withPrefix keeps the candidates that start with prefix.
func withPrefix(candidates []string, prefix string) []string {
	var out []string
	for _, c := range candidates {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// withoutArgs drops the names already given.
func withoutArgs(names, given []string) []string {
	return slices.DeleteFunc(names, func(n string) bool { return slices.Contains(given, n) })
}

// completeLabNames completes the names of the labs that are up.
func completeLabNames(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	names, err := lab.List()
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, noFiles
	}
	return withPrefix(names, toComplete), noFiles
}

// fromLab completes with what f reads from the lab named *name, or with
// nothing when the lab is not up or stays busy.
func fromLab(cmd *cobra.Command, name *string, toComplete string, f func(context.Context, *lab.Lab) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	l, err := lab.OpenWait(ctx, *name, completionWait)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, noFiles
	}
	defer l.Close()
	c, err := f(ctx, l)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, noFiles
	}
	return withPrefix(c, toComplete), noFiles
}

// labPlaces completes a place: client, a node or a running pod.
func labPlaces(name *string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, noFiles
		}
		return fromLab(cmd, name, toComplete, func(ctx context.Context, l *lab.Lab) ([]string, error) { return l.Places(ctx) })
	}
}

// namesOf returns the names of the objects of resource type res (any
// name `get` accepts) in r: in namespace ns, or NAMESPACE/NAME from every
// namespace when ns is "".
func namesOf(r *controlplane.Result, res, ns string) []string {
	var out []string
	add := func(namespace, name string) {
		switch {
		case namespace == "" || ns == namespace:
			out = append(out, name)
		case ns == "":
			out = append(out, namespace+"/"+name)
		}
	}
	switch kubectlget.Resource(res) {
	case "services":
		for _, s := range r.Services {
			add(s.Namespace, s.Name)
		}
	case "endpointslices":
		for _, s := range r.EndpointSlices {
			add(s.Namespace, s.Name)
		}
	case "pods":
		for _, p := range r.Pods {
			add(p.Namespace, p.Name)
		}
	case "nodes":
		for _, n := range r.Nodes {
			add("", n.Name)
		}
	case "ipaddresspools":
		for _, p := range r.Pools {
			add("", p.Name)
		}
	case "events":
		for _, e := range r.Events {
			add(e.Namespace, e.Name)
		}
	}
	switch strings.ToLower(res) {
	case "namespace", "namespaces", "ns":
		for _, n := range r.Namespaces {
			add("", n.Name)
		}
	case "endpoints", "ep":
		// Endpoints are named after their Service.
		for _, s := range r.Services {
			add(s.Namespace, s.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// labNamespaces completes -n with the lab's namespaces.
func labNamespaces(name *string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return fromLab(cmd, name, toComplete, func(ctx context.Context, l *lab.Lab) ([]string, error) {
			r, err := l.Get(ctx)
			if err != nil {
				return nil, err
			}
			return namesOf(r, "namespaces", ""), nil
		})
	}
}

// labServiceTargets returns the lab's Services as lab trace takes them
// (NAMESPACE/NAME), or as lab curl does (svc/NAME in default,
// NAMESPACE/svc/NAME elsewhere).
func labServiceTargets(ctx context.Context, l *lab.Lab, curl bool) ([]string, error) {
	r, err := l.Get(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range r.Services {
		switch {
		case !curl:
			out = append(out, s.Namespace+"/"+s.Name)
		case s.Namespace == "default":
			out = append(out, "svc/"+s.Name)
		default:
			out = append(out, s.Namespace+"/svc/"+s.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// namespaceFlag returns the value of cmd's -n flag ("default" unset).
func namespaceFlag(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("namespace"); f != nil {
		return f.Value.String()
	}
	return "default"
}

// allNamespacesFlag reports cmd's -A.
func allNamespacesFlag(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("all-namespaces")
	return f != nil && f.Value.String() == "true"
}

// completeLab sets the completions of the lab commands: --name, each
// command's arguments, and -n.
func completeLab(labCmd *cobra.Command, name *string) {
	_ = labCmd.RegisterFlagCompletionFunc("name", completeLabNames)
	places := labPlaces(name)
	for _, c := range labCmd.Commands() {
		switch c.Name() {
		case "get":
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) == 0 {
					return withPrefix(resourceTypes(), toComplete), noFiles
				}
				if strings.ContainsAny(args[0], "/,") || kubectlget.Resource(args[0]) == "" {
					return nil, noFiles
				}
				return fromLab(cmd, name, toComplete, func(ctx context.Context, l *lab.Lab) ([]string, error) {
					r, err := l.Get(ctx)
					if err != nil {
						return nil, err
					}
					if !allNamespacesFlag(cmd) {
						return withoutArgs(namesOf(r, args[0], namespaceFlag(cmd)), args[1:]), nil
					}
					// get takes bare names with -A: every namespace's.
					var names []string
					for _, n := range namesOf(r, args[0], "") {
						_, bare, _ := strings.Cut(n, "/")
						if bare == "" {
							bare = n
						}
						names = append(names, bare)
					}
					slices.Sort(names)
					return withoutArgs(slices.Compact(names), args[1:]), nil
				})
			}
		case "describe":
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) == 0 {
					return withPrefix(describeTypes, toComplete), noFiles
				}
				if _, err := describe.Resource(args[0]); err != nil || strings.Contains(args[0], "/") {
					return nil, noFiles
				}
				return fromLab(cmd, name, toComplete, func(ctx context.Context, l *lab.Lab) ([]string, error) {
					r, err := l.Get(ctx)
					if err != nil {
						return nil, err
					}
					return withoutArgs(namesOf(r, args[0], namespaceFlag(cmd)), args[1:]), nil
				})
			}
		case "delete":
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				switch len(args) {
				case 0:
					return withPrefix(deleteTypes, toComplete), noFiles
				case 1:
					return fromLab(cmd, name, toComplete, func(ctx context.Context, l *lab.Lab) ([]string, error) {
						r, err := l.Get(ctx)
						if err != nil {
							return nil, err
						}
						return namesOf(r, args[0], namespaceFlag(cmd)), nil
					})
				}
				return nil, noFiles
			}
		case "exec":
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) == 0 {
					return places(cmd, args, toComplete)
				}
				return nil, cobra.ShellCompDirectiveDefault
			}
		case "curl", "trace":
			curl := c.Name() == "curl"
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				switch len(args) {
				case 0:
					return places(cmd, args, toComplete)
				case 1:
					return fromLab(cmd, name, toComplete, func(ctx context.Context, l *lab.Lab) ([]string, error) {
						svcs, err := labServiceTargets(ctx, l, curl)
						if err != nil || curl {
							return svcs, err
						}
						ps, err := l.Places(ctx)
						if err != nil {
							return nil, err
						}
						return append(svcs, ps[1:]...), nil // a trace goes to a node or a pod too
					})
				}
				return nil, noFiles
			}
		}
		if c.Flags().Lookup("namespace") != nil {
			_ = c.RegisterFlagCompletionFunc("namespace", labNamespaces(name))
		}
	}
}

// describeTypes are the types describe takes.
var describeTypes = []string{"nodes", "pods", "services"}

// completeTypes sets the completion of a command's first argument, a
// resource type among types (svcnet get's and describe's).
func completeTypes(c *cobra.Command, types func() []string) {
	c.ValidArgsFunction = func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, noFiles
		}
		return withPrefix(types(), toComplete), noFiles
	}
}

package describe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/kubectlget"
)

// Options are kubectl describe's flags.
type Options struct {
	Namespace     string // -n; "" is default
	AllNamespaces bool   // -A
	Selector      string // -l
	// ShowEvents is --show-events when given; by default events are shown
	// when one object is described, not for several or by name prefix.
	ShowEvents *bool
	Now        time.Time // ages are counted from it
}

// target is an object the arguments name.
type target struct {
	resource string
	types.NamespacedName
}

// Run writes to out what kubectl describe writes for args (TYPE, TYPE
// NAME..., TYPE/NAME...) read through r: each object found, a blank line
// between two. TYPE alone describes every object of the type in the
// namespace (or all with AllNamespaces) that Selector matches. A single
// TYPE NAME that does not exist describes the objects whose names start
// with NAME, as kubectl does, each followed by a newline. Objects not
// found are kubectl's NotFound errors, joined, after the others are
// written; "No resources found" notices go to errOut.
func Run(ctx context.Context, out, errOut io.Writer, r Reader, args []string, o Options) error {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	targets, listed, err := o.targets(ctx, r, args)
	if err != nil {
		return err
	}
	var texts []string
	var missing []error
	var found []target
	for _, t := range targets {
		// Existence first: events are shown only for a single object found
		// without error.
		_, ok, err := describe(ctx, r, t.resource, t.Namespace, t.Name, false, o.Now)
		if err != nil {
			return fmt.Errorf("describe %s %s: %w", strings.TrimSuffix(t.resource, "s"), t.Name, err)
		}
		if !ok {
			missing = append(missing, &kubectlget.NotFoundError{Resource: t.resource, Name: t.Name})
			continue
		}
		found = append(found, t)
	}
	showEvents := len(missing) == 0 && len(found) <= 1
	if o.ShowEvents != nil {
		showEvents = *o.ShowEvents
	}
	if len(missing) > 0 && len(args) == 2 && !strings.Contains(args[0], "/") && len(found) == 0 {
		return o.byPrefix(ctx, out, r, targets[0], missing[0], showEvents)
	}
	for _, t := range found {
		text, _, err := describe(ctx, r, t.resource, t.Namespace, t.Name, showEvents, o.Now)
		if err != nil {
			return fmt.Errorf("describe %s %s: %w", strings.TrimSuffix(t.resource, "s"), t.Name, err)
		}
		texts = append(texts, text)
	}
	if _, err := io.WriteString(out, strings.Join(texts, "\n\n")); err != nil {
		return err
	}
	if listed && len(found) == 0 {
		if o.AllNamespaces {
			fmt.Fprintln(errOut, "No resources found")
		} else {
			fmt.Fprintf(errOut, "No resources found in %s namespace.\n", o.Namespace)
		}
	}
	return errors.Join(missing...)
}

// targets are the objects args name, or (listed) those TYPE alone lists.
func (o Options) targets(ctx context.Context, r Reader, args []string) (out []target, listed bool, err error) {
	if len(args) == 0 {
		return nil, false, errors.New("you must specify the type of resource to describe (services, pods or nodes)")
	}
	ns := o.Namespace
	if o.AllNamespaces {
		ns = ""
	}
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			typ, name, ok := strings.Cut(a, "/")
			if !ok || typ == "" || name == "" || strings.Contains(name, "/") {
				return nil, false, fmt.Errorf("arguments in resource/name form must have a single resource and name")
			}
			res, err := Resource(typ)
			if err != nil {
				return nil, false, err
			}
			out = append(out, target{res, types.NamespacedName{Namespace: o.nsOf(res), Name: name}})
		}
		return out, false, nil
	}
	res, err := Resource(args[0])
	if err != nil {
		return nil, false, err
	}
	if len(args) > 1 {
		if o.AllNamespaces {
			return nil, false, errors.New("a resource cannot be retrieved by name across all namespaces")
		}
		for _, name := range args[1:] {
			out = append(out, target{res, types.NamespacedName{Namespace: o.nsOf(res), Name: name}})
		}
		return out, false, nil
	}
	sel, err := labels.Parse(o.Selector)
	if err != nil {
		return nil, false, fmt.Errorf("-l %q: %w", o.Selector, err)
	}
	names, err := r.List(ctx, res, ns, sel)
	if err != nil {
		return nil, false, err
	}
	for _, n := range names {
		out = append(out, target{res, n})
	}
	return out, true, nil
}

// nsOf is the namespace of a named object of resource.
func (o Options) nsOf(resource string) string {
	if resource == "nodes" {
		return ""
	}
	return o.Namespace
}

// byPrefix describes the objects of t's type in its namespace whose names
// start with t's name, each followed by a newline; notFound when none.
func (o Options) byPrefix(ctx context.Context, out io.Writer, r Reader, t target, notFound error, showEvents bool) error {
	names, err := r.List(ctx, t.resource, t.Namespace, labels.Everything())
	if err != nil {
		return err
	}
	any := false
	for _, n := range names {
		if !strings.HasPrefix(n.Name, t.Name) {
			continue
		}
		text, ok, err := describe(ctx, r, t.resource, n.Namespace, n.Name, showEvents, o.Now)
		if err != nil {
			return err
		}
		if ok {
			any = true
			fmt.Fprintf(out, "%s\n", text)
		}
	}
	if !any {
		return notFound
	}
	return nil
}

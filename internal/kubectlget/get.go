package kubectlget

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/svcnet/svcnet/internal/controlplane"
	tables "github.com/svcnet/svcnet/internal/printers"
)

// Options are get's flags.
type Options struct {
	// Namespace is -n ("" is default); AllNamespaces -A.
	Namespace     string
	AllNamespaces bool
	// Selector is -l, FieldSelector --field-selector.
	Selector, FieldSelector string
	// Output is -o: "" (the table), wide, name, json, yaml,
	// jsonpath=..., jsonpath-as-json=..., custom-columns=...,
	// go-template=...
	Output                string
	ShowLabels, NoHeaders bool
	// SortBy is --sort-by, a JSONPath expression.
	SortBy string
	// Now is the reference time of the AGE column.
	Now time.Time
}

// NotFoundError is kubectl's error for an object asked for by name that
// does not exist.
type NotFoundError struct{ Resource, Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("Error from server (NotFound): %s %q not found", e.Resource, e.Name)
}

// ValidateOutput checks -o before anything is read.
func ValidateOutput(output string) error {
	if output == "" || output == "wide" {
		return nil
	}
	_, err := printerFor(output, false)
	return err
}

// printerFor returns the cli-runtime printer of an -o form other than the
// tables (kubectl's: a missing key in a template prints nothing).
func printerFor(output string, noHeaders bool) (printers.ResourcePrinter, error) {
	form, arg, _ := strings.Cut(output, "=")
	switch form {
	case "json":
		return &printers.JSONPrinter{}, nil
	case "yaml":
		return &printers.YAMLPrinter{}, nil
	case "name":
		return &printers.NamePrinter{}, nil
	case "jsonpath", "jsonpath-as-json":
		if arg == "" {
			return nil, fmt.Errorf("template format specified but no template given")
		}
		p, err := printers.NewJSONPathPrinter(arg)
		if err != nil {
			return nil, fmt.Errorf("error parsing jsonpath %s, %w", arg, err)
		}
		p.AllowMissingKeys(true)
		p.EnableJSONOutput(form == "jsonpath-as-json")
		return p, nil
	case "go-template", "template":
		if arg == "" {
			return nil, fmt.Errorf("template format specified but no template given")
		}
		p, err := printers.NewGoTemplatePrinter([]byte(arg))
		if err != nil {
			return nil, fmt.Errorf("error parsing template %s, %w", arg, err)
		}
		p.AllowMissingKeys(true)
		return p, nil
	case "custom-columns":
		return newCustomColumns(arg, noHeaders)
	}
	return nil, fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: custom-columns,go-template,json,jsonpath,jsonpath-as-json,name,template,wide,yaml", output)
}

// Get prints what args ask for of r to out, as kubectl get prints it, and
// kubectl's notices to errOut ("No resources found ..."). Objects asked
// for by name that do not exist are NotFoundErrors, joined, after the
// others are printed.
//
// What it prints goes through one buffer, flushed before it returns: a
// table is written cell by cell, and 10,000 Services written so straight
// to a terminal or pipe cost a system call per cell, about a third of
// `svcnet get services -A` on a manifest.
func Get(out, errOut io.Writer, r *controlplane.Result, args []string, o Options) error {
	q, err := newQuery(args, o)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	_, err = q.list(bw, errOut, r)
	if ferr := bw.Flush(); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// list prints what the query picks of r, as Get, and returns it.
func (q *query) list(out, errOut io.Writer, r *controlplane.Result) ([]listed, error) {
	found, missing, err := q.pick(r)
	if err != nil {
		return nil, err
	}
	if err := q.print(out, errOut, found, len(missing) == 0, false); err != nil {
		return nil, err
	}
	return found, errors.Join(missing...)
}

// query is get's arguments and flags, checked.
type query struct {
	req  *request
	o    Options
	ns   string
	sel  labels.Selector
	fsel fields.Selector
}

// listed is what a query picked of one type.
type listed struct {
	k    *kind
	objs []Object
}

func newQuery(args []string, o Options) (*query, error) {
	req, err := parseArgs(args)
	if err != nil {
		return nil, err
	}
	if err := ValidateOutput(o.Output); err != nil {
		return nil, err
	}
	q := &query{req: req, o: o, ns: o.Namespace}
	if q.ns == "" {
		q.ns = "default"
	}
	if q.sel, err = labels.Parse(o.Selector); err != nil {
		return nil, fmt.Errorf("unable to parse requirement: %w", err)
	}
	if q.fsel, err = fields.ParseSelector(o.FieldSelector); err != nil {
		return nil, err
	}
	for _, rq := range q.fsel.Requirements() {
		if rq.Field != "metadata.name" && rq.Field != "metadata.namespace" {
			return nil, fmt.Errorf("field label not supported: %s (only metadata.name and metadata.namespace)", rq.Field)
		}
	}
	for _, k := range req.kinds {
		if len(req.names[k]) > 0 && (o.Selector != "" || o.FieldSelector != "") {
			return nil, errors.New("name cannot be provided when a selector is specified")
		}
		if len(req.names[k]) > 0 && o.AllNamespaces && k.namespaced {
			return nil, errors.New("a resource cannot be retrieved by name across all namespaces")
		}
	}
	return q, nil
}

// pick chooses the query's objects of r, per type: in list order
// (namespace, name), or in the order names were given; missing are the
// names not found.
func (q *query) pick(r *controlplane.Result) (found []listed, missing []error, err error) {
	for _, k := range q.req.kinds {
		var objs []Object
		for _, obj := range k.objects(r) {
			if k.namespaced && !q.o.AllNamespaces && obj.GetNamespace() != q.ns {
				continue
			}
			if !q.sel.Matches(labels.Set(obj.GetLabels())) ||
				!q.fsel.Empty() && !q.fsel.Matches(fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}) {
				continue
			}
			objs = append(objs, obj)
		}
		slices.SortStableFunc(objs, func(a, b Object) int {
			if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
				return c
			}
			return strings.Compare(a.GetName(), b.GetName())
		})
		if names := q.req.names[k]; len(names) > 0 {
			var picked []Object
			for _, n := range names {
				i := slices.IndexFunc(objs, func(x Object) bool { return x.GetName() == n })
				if i < 0 {
					missing = append(missing, &NotFoundError{Resource: k.qualified, Name: n})
					continue
				}
				picked = append(picked, objs[i])
			}
			objs = picked
		}
		if q.o.SortBy != "" {
			if objs, err = sortObjects(objs, q.o.SortBy); err != nil {
				return nil, nil, err
			}
		}
		found = append(found, listed{k, objs})
	}
	return found, missing, nil
}

// print prints found as get does; complete is false when names were
// missing (a single object is then not printed alone, and no "No
// resources found" is said). rows prints table rows only, each type's
// without a blank line before it (a watch's changes).
func (q *query) print(out, errOut io.Writer, found []listed, complete, rows bool) error {
	total := 0
	for _, l := range found {
		total += len(l.objs)
	}
	o := q.o
	if o.Output != "" && o.Output != "wide" {
		var objs []Object
		for _, l := range found {
			objs = append(objs, l.objs...)
		}
		return printObjects(out, objs, q.req.single && complete && !rows, o)
	}
	printed := 0
	for _, l := range found {
		if len(l.objs) == 0 {
			continue
		}
		if printed > 0 && !rows {
			fmt.Fprintln(out)
		}
		popts := tables.Options{Wide: o.Output == "wide", AllNamespaces: o.AllNamespaces, Now: o.Now,
			NoHeaders: o.NoHeaders || rows, ShowLabels: o.ShowLabels}
		if q.req.several {
			popts.KindPrefix = l.k.prefix
		}
		if err := l.k.table(out, l.objs, popts); err != nil {
			return err
		}
		printed++
	}
	if total == 0 && complete && !rows {
		where := " in " + q.ns + " namespace"
		if o.AllNamespaces || !q.req.kinds[0].namespaced {
			where = ""
		}
		fmt.Fprintf(errOut, "No resources found%s.\n", where)
	}
	return nil
}

// printObjects prints objs in one of the -o forms other than the tables:
// name line by line; the others over the objects as unstructured, one
// object alone when single, else a v1 List (kubectl's).
func printObjects(out io.Writer, objs []Object, single bool, o Options) error {
	us := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
		us[i] = &unstructured.Unstructured{Object: m}
	}
	p, err := printerFor(o.Output, o.NoHeaders)
	if err != nil {
		return err
	}
	// kubectl leaves managedFields out unless --show-managed-fields.
	p = &printers.OmitManagedFieldsPrinter{Delegate: p}
	if o.Output == "name" {
		for _, u := range us {
			if err := p.PrintObj(u, out); err != nil {
				return err
			}
		}
		return nil
	}
	if single && len(us) == 1 {
		return p.PrintObj(us[0], out)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"kind": "List", "apiVersion": "v1",
		"metadata": map[string]any{"resourceVersion": ""}}}
	for _, u := range us {
		list.Items = append(list.Items, *u)
	}
	data, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	converted, err := runtime.Decode(unstructured.UnstructuredJSONScheme, data)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	return p.PrintObj(converted, out)
}

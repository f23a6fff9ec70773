package kubectlget

import (
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// customColumns is kubectl's -o custom-columns=HEADER:FIELD,...: a table
// with a column per spec, each cell the values the field's JSONPath finds
// in the object joined with ",", or <none>.
type customColumns struct {
	headers   []string
	parsers   []*jsonpath.JSONPath
	noHeaders bool
}

func newCustomColumns(spec string, noHeaders bool) (*customColumns, error) {
	if spec == "" {
		return nil, fmt.Errorf("custom-columns format specified but no custom columns given")
	}
	cc := &customColumns{noHeaders: noHeaders}
	for _, col := range strings.Split(spec, ",") {
		header, field, ok := strings.Cut(col, ":")
		if !ok {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", col)
		}
		expr, err := relaxedJSONPath(field)
		if err != nil {
			return nil, err
		}
		p := jsonpath.New(header).AllowMissingKeys(true)
		if err := p.Parse(expr); err != nil {
			return nil, err
		}
		cc.headers = append(cc.headers, header)
		cc.parsers = append(cc.parsers, p)
	}
	return cc, nil
}

var relaxedRE = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// relaxedJSONPath turns name1.name2, .name1.name2, {name1.name2} or
// {.name1.name2} into {.name1.name2}, as kubectl does.
func relaxedJSONPath(path string) (string, error) {
	if path == "" {
		return path, nil
	}
	m := relaxedRE.FindStringSubmatch(path)
	if m == nil {
		return "", fmt.Errorf("unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'")
	}
	field := m[1]
	if field == "" {
		field = m[2]
	}
	return "{." + field + "}", nil
}

// PrintObj prints obj, a list's items one row each.
func (cc *customColumns) PrintObj(obj runtime.Object, out io.Writer) error {
	w := printers.GetNewTabWriter(out)
	defer w.Flush()
	if !cc.noHeaders {
		fmt.Fprintln(w, strings.Join(cc.headers, "\t"))
	}
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		for _, item := range items {
			if err := cc.row(item, w); err != nil {
				return err
			}
		}
		return nil
	}
	return cc.row(obj, w)
}

func (cc *customColumns) row(obj runtime.Object, out io.Writer) error {
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return fmt.Errorf("custom-columns: %T is not unstructured", obj)
	}
	cells := make([]string, len(cc.parsers))
	for i, p := range cc.parsers {
		values, err := p.FindResults(u.UnstructuredContent())
		if err != nil {
			return err
		}
		var strs []string
		if len(values) == 0 || len(values[0]) == 0 {
			strs = append(strs, "<none>")
		}
		for _, vs := range values {
			for _, v := range vs {
				strs = append(strs, valueString(v))
			}
		}
		cells[i] = strings.Join(strs, ",")
	}
	_, err := fmt.Fprintln(out, strings.Join(cells, "\t"))
	return err
}

// valueString prints one value a JSONPath found, as kubectl's custom
// columns do (fmt's %v of the value).
func valueString(v reflect.Value) string {
	if v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	return fmt.Sprintf("%v", v.Interface())
}

package printers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// List prints objects as kubectl -o json or -o yaml prints a list: a v1 List with
// the items in the given order. Each item must have its TypeMeta (apiVersion, kind) set.
func List(w io.Writer, format string, items []runtime.Object) error {
	list := map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"items":      items,
		"metadata":   map[string]any{"resourceVersion": ""},
	}
	if items == nil {
		list["items"] = []runtime.Object{}
	}
	switch format {
	case "json":
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "    ")
		if err := enc.Encode(list); err != nil {
			return fmt.Errorf("printing json: %w", err)
		}
		_, err := w.Write(buf.Bytes())
		return err
	case "yaml":
		b, err := yaml.Marshal(list)
		if err != nil {
			return fmt.Errorf("printing yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q (want json, yaml, wide or none)", format)
}

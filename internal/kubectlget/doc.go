// Package kubectlget is `kubectl get` over objects svcnet holds in memory
// (the embedded control plane's result, or what it listed from an API
// server): its arguments (TYPE, TYPE NAME..., TYPE/NAME..., TYPE,TYPE,
// all), its filters (-n, -A, -l with set-based selectors,
// --field-selector metadata.name and metadata.namespace), and its output
// forms, printed as kubectl prints them: the tables of internal/printers
// (wide, --show-labels, --no-headers, KIND/NAME when several types are
// listed), and -o name, json, yaml, jsonpath, jsonpath-as-json and
// go-template through k8s.io/cli-runtime's printers, over the objects as
// unstructured (kubectl prints what the API server sends, keys sorted), a
// single named object alone and anything else in a v1 List.
//
// Two pieces of kubectl are written again here, each a few dozen lines:
// -o custom-columns (customColumns) and --sort-by (sortObjects). They live in k8s.io/kubectl's
// pkg/cmd/get, whose import grows the svcnet binary from 56 MB to 119 MB
// (138 more packages: the whole kubectl get command, OpenAPI, discovery).
// The kubectl-parity tests (test/kube) hold both to kubectl's output byte
// for byte.
//
// A cost measured: -o go-template is text/template, whose calls of methods
// by name keep the linker from dropping any exported method of any type:
// the svcnet binary grows from 56 MB to 87 MB with it (to 56.1 MB with
// every other form here). kubectl pays the same; svcnet keeps the form for
// kubectl's users and scripts.
package kubectlget

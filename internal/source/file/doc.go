// Package file is the state source for running without a cluster: it reads
// Kubernetes manifests (multi-document YAML or JSON, kubectl style, from a file or a
// directory), runs them through the embedded control plane, persists the control
// plane's allocations beside the manifests, and feeds the result to a model.Store,
// reloading on every change of the files (fsnotify).
//
// An invalid object is reported and left out; every valid object is still served.
package file

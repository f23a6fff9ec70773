// Package kube holds the kube-tier tests that need more than one svcnet package: the
// parity of the embedded control plane with the real kube-apiserver and
// kube-controller-manager. Its tests start a real control plane (internal/kubetest).
package kube

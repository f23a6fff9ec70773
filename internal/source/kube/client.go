package kube

import (
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// userAgent identifies svcnet's requests in apiserver logs and audit.
const userAgent = "svcnet"

// RESTConfig returns the client configuration for --kubeconfig. A non-empty path is
// loaded as is. An empty path means the in-cluster configuration (service-account
// token and KUBERNETES_SERVICE_HOST) when running in a Pod, else the kubeconfig
// named by $KUBECONFIG, else ~/.kube/config.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if kubeconfig == "" {
			return nil, fmt.Errorf("not in a cluster and no usable kubeconfig ($KUBECONFIG, ~/.kube/config): %w", err)
		}
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// NewClient returns a clientset for --kubeconfig (see RESTConfig) that speaks
// protobuf, as kube-proxy does, and names itself svcnet.
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return NewClientFor(cfg)
}

// NewClientFor is NewClient for a REST config already made (with its own
// warning handler, say).
func NewClientFor(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

package main

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/dns"
)

// defaultKubeDNSConfigMap is where kube-dns reads its forwarding.
const defaultKubeDNSConfigMap = "kube-system/kube-dns"

// parseConfigMapRef splits --config-map NAMESPACE/NAME, validated as the
// apiserver validates them.
func parseConfigMapRef(ref string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok {
		return "", "", fmt.Errorf("--config-map %q: want NAMESPACE/NAME", ref)
	}
	if errs := apivalidation.ValidateNamespaceName(namespace, false); len(errs) > 0 {
		return "", "", fmt.Errorf("--config-map %q: namespace %q: %s", ref, namespace, strings.Join(errs, "; "))
	}
	if errs := apivalidation.NameIsDNSSubdomain(name, false); len(errs) > 0 {
		return "", "", fmt.Errorf("--config-map %q: name %q: %s", ref, name, strings.Join(errs, "; "))
	}
	return namespace, name, nil
}

// watchKubeDNSConfigMap keeps srv's forwarding as the kube-dns ConfigMap
// namespace/name says (dns.ParseKubeDNSConfigMap) until ctx ends: its
// stubDomains and upstreamNameservers apply while it exists, the
// configuration's --upstream when it does not. A ConfigMap that does not
// parse is logged and changes nothing: the forwarding in force stays. It
// watches that one object only (a field selector on its name).
func watchKubeDNSConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name string, srv *dns.Server, log klog.Logger) error {
	ref := namespace + "/" + name
	apply := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		f, err := dns.ParseKubeDNSConfigMap(ref, cm.Data, srv.Base())
		if err != nil {
			log.Error(err, "ConfigMap ignored: the forwarding in force stays", "configMap", ref, "resourceVersion", cm.ResourceVersion)
			return
		}
		srv.SetForwarding(&f)
	}
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "configmaps", namespace, fields.OneTermEqualSelector("metadata.name", name))
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    apply,
			UpdateFunc: func(_, obj any) { apply(obj) },
			DeleteFunc: func(any) { srv.SetForwarding(nil) },
		},
	})
	log.Info("Watching the kube-dns ConfigMap for stubDomains and upstreamNameservers", "configMap", ref)
	ctrl.RunWithContext(ctx)
	return nil
}

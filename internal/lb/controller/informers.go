package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
	"github.com/svcnet/svcnet/internal/model"
)

// poolGVR is the IPAddressPool resource.
var poolGVR = pool.SchemeGroupVersion.WithResource(pool.Resource)

// informerSet holds the controller's informers and listers.
type informerSet struct {
	factory    informers.SharedInformerFactory
	dynFactory dynamicinformer.DynamicSharedInformerFactory
	synced     []cache.DoneChecker
	names      []string // of synced's informers

	services   corelisters.ServiceLister
	namespaces corelisters.NamespaceLister
	nodes      corelisters.NodeLister
	slices     discoverylisters.EndpointSliceLister
	pools      cache.Store
	// serviceCIDRs is nil when the apiserver serves no ServiceCIDRs.
	serviceCIDRs networkinglisters.ServiceCIDRLister
	// flagCIDRs are Config.ServiceCIDRs.
	flagCIDRs []netip.Prefix
}

// startInformers creates the informers, registers the controller's handlers
// and starts them; they stop when ctx ends (then call shutdown to wait).
// ServiceCIDRs are watched when withServiceCIDRs.
func (c *Controller) startInformers(ctx context.Context, withServiceCIDRs bool) (*informerSet, error) {
	f := informers.NewSharedInformerFactory(c.client, 0)
	df := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, 0)
	s := &informerSet{factory: f, dynFactory: df, flagCIDRs: c.cfg.ServiceCIDRs}

	svc := f.Core().V1().Services()
	ns := f.Core().V1().Namespaces()
	node := f.Core().V1().Nodes()
	slice := f.Discovery().V1().EndpointSlices()
	pools := df.ForResource(pool.SchemeGroupVersion.WithResource(pool.Resource))
	s.services, s.namespaces, s.nodes, s.slices = svc.Lister(), ns.Lister(), node.Lister(), slice.Lister()
	s.pools = pools.Informer().GetStore()

	// A Service change marks that Service (its failed write may be retried at
	// once); any other change only wakes the loop.
	serviceKey := func(obj any) model.ServiceKey {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if s, ok := obj.(*corev1.Service); ok {
			return model.ServiceKey{Namespace: s.Namespace, Name: s.Name}
		}
		return model.ServiceKey{}
	}
	onService := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.changed(serviceKey(obj)) },
		UpdateFunc: func(_, obj any) { c.changed(serviceKey(obj)) },
		DeleteFunc: func(obj any) { c.changed(serviceKey(obj)) },
	}
	onOther := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.changed(model.ServiceKey{}) },
		UpdateFunc: func(any, any) { c.changed(model.ServiceKey{}) },
		DeleteFunc: func(any) { c.changed(model.ServiceKey{}) },
	}
	type watched struct {
		name     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}
	all := []watched{
		{"Service", svc.Informer(), onService},
		{"Namespace", ns.Informer(), onOther},
		{"Node", node.Informer(), onOther},
		{"EndpointSlice", slice.Informer(), onOther},
		{"IPAddressPool", pools.Informer(), onOther},
	}
	if withServiceCIDRs {
		sc := f.Networking().V1().ServiceCIDRs()
		s.serviceCIDRs = sc.Lister()
		all = append(all, watched{"ServiceCIDR", sc.Informer(), onOther})
	}
	for _, i := range all {
		reg, err := i.informer.AddEventHandlerWithOptions(i.handler, cache.HandlerOptions{Logger: &c.log})
		if err != nil {
			return nil, fmt.Errorf("lb controller: %s informer handler: %w", i.name, err)
		}
		s.synced = append(s.synced, reg.HasSyncedChecker())
		s.names = append(s.names, i.name)
	}
	f.Start(ctx.Done())
	df.Start(ctx.Done())
	return s, nil
}

// syncReportPeriod is how often waitForSync logs the informers still listing.
const syncReportPeriod = 30 * time.Second

// waitForSync waits until every informer has listed and delivered its objects
// to the handlers; false when ctx ended first. Every syncReportPeriod it logs
// the ones still waiting (the IPAddressPool one never syncs while the CRD is
// not installed, or while the controller may not list pools).
func (s *informerSet) waitForSync(ctx context.Context, log klog.Logger) bool {
	for {
		wctx, cancel := context.WithTimeout(ctx, syncReportPeriod)
		ok := cache.WaitFor(wctx, "", s.synced...)
		cancel()
		switch {
		case ok:
			return true
		case ctx.Err() != nil:
			return false
		}
		var waiting []string
		for i, c := range s.synced {
			if !cache.IsDone(c) {
				waiting = append(waiting, s.names[i])
			}
		}
		log.Info("Waiting for informer caches to sync; no status is written until they have", "waiting", waiting,
			"hint", "IPAddressPools need deploy/lb/crd.yaml installed and list/watch on ipaddresspools.svcnet.io")
	}
}

// shutdown waits for the informers' goroutines; their context must have ended.
func (s *informerSet) shutdown() {
	s.factory.Shutdown()
	s.dynFactory.Shutdown()
}

// pool returns the cached IPAddressPool name.
func (s *informerSet) pool(name string) (*unstructured.Unstructured, bool) {
	obj, ok, err := s.pools.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// input lists the caches into a planner input. Services and pools are returned
// as stored (callers must not modify them) except where overlay and
// poolOverlay replace one by a copy carrying the status this controller wrote
// and the cache does not show yet. IPAddressPools that fail to convert are left
// out and returned as errors. The service CIDRs are the flag's and every
// ServiceCIDR's.
func (s *informerSet) input(overlay func(*corev1.Service) *corev1.Service, poolOverlay func(*pool.IPAddressPool) *pool.IPAddressPool) (plan.Input, []error, error) {
	var in plan.Input
	var poolErrs []error
	svcs, err := s.services.List(labels.Everything())
	if err != nil {
		return in, nil, fmt.Errorf("list services: %w", err)
	}
	for _, svc := range svcs {
		in.Services = append(in.Services, overlay(svc))
	}
	if in.Namespaces, err = s.namespaces.List(labels.Everything()); err != nil {
		return in, nil, fmt.Errorf("list namespaces: %w", err)
	}
	if in.Nodes, err = s.nodes.List(labels.Everything()); err != nil {
		return in, nil, fmt.Errorf("list nodes: %w", err)
	}
	var eps []*discoveryv1.EndpointSlice
	if eps, err = s.slices.List(labels.Everything()); err != nil {
		return in, nil, fmt.Errorf("list endpointslices: %w", err)
	}
	in.EndpointSlices = eps
	for _, obj := range s.pools.List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			poolErrs = append(poolErrs, fmt.Errorf("ipaddresspool cache holds a %T", obj))
			continue
		}
		p, err := pool.FromUnstructured(u)
		if err != nil {
			poolErrs = append(poolErrs, err) // names the pool
			continue
		}
		in.Pools = append(in.Pools, poolOverlay(p))
	}
	sort.Slice(in.Pools, func(i, j int) bool { return in.Pools[i].Name < in.Pools[j].Name })
	in.ServiceCIDRs = slices.Clone(s.flagCIDRs)
	if s.serviceCIDRs != nil {
		cidrs, err := s.serviceCIDRs.List(labels.Everything())
		if err != nil {
			return in, nil, fmt.Errorf("list servicecidrs: %w", err)
		}
		for _, sc := range cidrs {
			for _, c := range sc.Spec.CIDRs {
				if p, err := netip.ParsePrefix(c); err == nil {
					in.ServiceCIDRs = append(in.ServiceCIDRs, p.Masked())
				}
			}
		}
	}
	return in, poolErrs, nil
}

// servesServiceCIDRs asks discovery whether the apiserver serves
// networking.k8s.io/v1 servicecidrs (Kubernetes 1.33 and later, where the
// apiserver makes one, "kubernetes", from --service-cluster-ip-range). The
// request is bound to ctx.
func servesServiceCIDRs(ctx context.Context, d discovery.DiscoveryInterface) (bool, error) {
	gv := networkingv1.SchemeGroupVersion
	var list metav1.APIResourceList
	if rc := d.RESTClient(); rc != nil {
		// JSON whatever the client prefers: a client that speaks protobuf
		// would otherwise be answered in protobuf.
		raw, err := rc.Get().AbsPath("/apis", gv.Group, gv.Version).SetHeader("Accept", "application/json").Do(ctx).Raw()
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("discovery of %s: %w", gv, err)
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return false, fmt.Errorf("discovery of %s: %w", gv, err)
		}
	} else {
		l, err := d.ServerResourcesForGroupVersion(gv.String())
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("discovery of %s: %w", gv, err)
		}
		list = *l
	}
	for _, res := range list.APIResources {
		if res.Name == "servicecidrs" {
			return true, nil
		}
	}
	return false, nil
}

package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/model"
)

// ErrNotSynced is returned by Run when the informer caches did not sync: the
// context ended first or Options.SyncTimeout passed (e.g. the apiserver is
// unreachable or svcnet may not list the resources).
var ErrNotSynced = errors.New("informer caches not synced")

// Options configures a Source.
type Options struct {
	// ServiceProxyName selects the Services (and EndpointSlices) this proxy owns by
	// the label service.kubernetes.io/service-proxy-name: when empty, those without
	// the label (as kube-proxy); else those whose label equals it.
	ServiceProxyName string
	// AllServices keeps every Service and EndpointSlice whatever its
	// service-proxy-name label (ServiceProxyName is then ignored): cluster DNS
	// names the Services of every proxy.
	AllServices bool
	// Pods also watches Pods (every namespace). Off by default: Pods are many and
	// only some consumers (DNS pod records, the lab) need them.
	Pods bool
	// ResyncPeriod is the informers' resync period; 0 disables resyncs (a resync
	// re-delivers unchanged objects, which the Source ignores anyway).
	ResyncPeriod time.Duration
	// SyncTimeout bounds the wait for the initial lists; 0 waits until the context
	// ends.
	SyncTimeout time.Duration
	// Logger is used for all logs; the zero value means klog.FromContext of Run's
	// context.
	Logger klog.Logger
}

// Source runs informers that feed one model.Store. Use New, then Run once.
type Source struct {
	client  kubernetes.Interface
	store   *model.Store
	opts    Options
	log     klog.Logger
	pending *pending
}

// New returns a Source writing to store. It starts nothing.
func New(client kubernetes.Interface, store *model.Store, opts Options) *Source {
	log := opts.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	return &Source{client: client, store: store, opts: opts, log: log.WithName("kube-source"), pending: newPending()}
}

// ServiceSelector returns the label selector for Services and EndpointSlices. Like
// kube-proxy it requires service.kubernetes.io/service-proxy-name to be absent (or,
// with a proxy name, equal to it). Unlike kube-proxy it does NOT exclude objects
// labelled service.kubernetes.io/headless: cluster DNS needs headless Services and
// their slices, so they enter the model marked Headless and the proxy skips them
// there.
func ServiceSelector(proxyName string) labels.Selector {
	var req *labels.Requirement
	var err error
	if proxyName == "" {
		req, err = labels.NewRequirement(model.LabelServiceProxyName, selection.DoesNotExist, nil)
	} else {
		req, err = labels.NewRequirement(model.LabelServiceProxyName, selection.Equals, []string{proxyName})
	}
	if err != nil {
		// Only an invalid label value can fail; Run validates it first.
		return labels.Nothing()
	}
	return labels.NewSelector().Add(*req)
}

// Run starts the informers, waits for their initial lists, publishes them as one
// snapshot with Synced set, then applies changes until ctx ends. It returns nil
// after a clean stop, or an error wrapping ErrNotSynced when the caches did not
// sync (ctx ended first or SyncTimeout passed). Every goroutine it started has
// stopped when it returns. Call Run once per Source.
func (s *Source) Run(ctx context.Context) error {
	if s.opts.Logger.GetSink() == nil {
		s.log = klog.FromContext(ctx).WithName("kube-source")
	}
	if s.opts.ServiceProxyName != "" {
		if _, err := labels.NewRequirement(model.LabelServiceProxyName, selection.Equals, []string{s.opts.ServiceProxyName}); err != nil {
			return fmt.Errorf("kube source: service proxy name %q: %w", s.opts.ServiceProxyName, err)
		}
	}
	sel := ServiceSelector(s.opts.ServiceProxyName).String()
	if s.opts.AllServices {
		sel = ""
	}
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, s.opts.ResyncPeriod,
		informers.WithTransform(transform))

	// Informers without the factories' default namespace index: nothing looks
	// objects up by namespace in the caches, and the index costs a set entry
	// per object.
	noIndex := cache.Indexers{}
	bySel := func(o *metav1.ListOptions) { o.LabelSelector = sel }
	informerList := []struct {
		name     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"Service", factory.InformerFor(&corev1.Service{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredServiceInformer(c, metav1.NamespaceAll, r, noIndex, bySel)
		}), s.serviceHandler()},
		{"EndpointSlice", factory.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return discoveryinformers.NewFilteredEndpointSliceInformer(c, metav1.NamespaceAll, r, noIndex, bySel)
		}), s.sliceHandler()},
		{"Node", factory.InformerFor(&corev1.Node{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredNodeInformer(c, r, noIndex, nil)
		}), s.nodeHandler()},
	}
	if s.opts.Pods {
		informerList = append(informerList, struct {
			name     string
			informer cache.SharedIndexInformer
			handler  cache.ResourceEventHandler
		}{"Pod", factory.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredPodInformer(c, metav1.NamespaceAll, r, noIndex, nil)
		}), s.podHandler()})
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	var synced []cache.DoneChecker
	for _, i := range informerList {
		reg, err := i.informer.AddEventHandlerWithOptions(i.handler, cache.HandlerOptions{Logger: &s.log})
		if err != nil {
			return fmt.Errorf("kube source: %s handler: %w", i.name, err)
		}
		synced = append(synced, reg.HasSyncedChecker())
	}
	factory.Start(runCtx.Done())

	syncCtx := runCtx
	if s.opts.SyncTimeout > 0 {
		var c context.CancelFunc
		syncCtx, c = context.WithTimeout(runCtx, s.opts.SyncTimeout)
		defer c()
	}
	start := time.Now()
	if !cache.WaitFor(syncCtx, "", synced...) {
		return fmt.Errorf("kube source: %w after %v: %w", ErrNotSynced, time.Since(start).Round(time.Millisecond), context.Cause(syncCtx))
	}
	n := s.flush(true)
	s.log.Info("Caches synced", "objects", n, "elapsed", time.Since(start).Round(time.Millisecond), "serviceSelector", sel, "pods", s.opts.Pods)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.pending.signal:
			s.flush(false)
		}
	}
}

// flush applies every pending change in one store transaction and, if synced,
// marks the store synced in the same transaction. It returns how many objects it
// applied.
func (s *Source) flush(synced bool) int {
	items := s.pending.take()
	s.store.Update(func(tx *model.Txn) {
		apply(tx, items)
		if synced {
			tx.SetSynced(true)
		}
	})
	return len(items)
}

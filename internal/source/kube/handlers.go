package kube

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/model"
)

// kind is the resource an objKey refers to.
type kind uint8

const (
	kindService kind = iota
	kindSlice
	kindNode
	kindPod
)

func (k kind) String() string {
	return [...]string{"Service", "EndpointSlice", "Node", "Pod"}[k]
}

// objKey names one API object; namespace is empty for Nodes.
type objKey struct {
	kind            kind
	namespace, name string
}

// pending holds, per object, the latest converted state seen since the last
// flush: a *model.Service, *model.EndpointSlice, *model.Node or *model.Pod to set,
// or nil to delete. Later events for one object replace earlier ones, so a flush
// applies each object's newest state once. signal (capacity 1) is sent after every
// put.
type pending struct {
	mu     sync.Mutex
	items  map[objKey]any
	signal chan struct{}
}

func newPending() *pending {
	return &pending{items: map[objKey]any{}, signal: make(chan struct{}, 1)}
}

func (p *pending) put(k objKey, v any) {
	p.mu.Lock()
	p.items[k] = v
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

func (p *pending) take() map[objKey]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	items := p.items
	p.items = map[objKey]any{}
	return items
}

// apply writes items into tx. The result does not depend on the map's order: each
// object is written once, and the Txn keys slices by their own name.
func apply(tx *model.Txn, items map[objKey]any) {
	for k, v := range items {
		switch k.kind {
		case kindService:
			if v == nil {
				tx.DeleteService(model.ServiceKey{Namespace: k.namespace, Name: k.name})
			} else {
				tx.SetService(v.(*model.Service))
			}
		case kindSlice:
			if v == nil {
				tx.DeleteEndpointSlice(k.namespace, k.name)
			} else {
				tx.SetEndpointSlice(v.(*model.EndpointSlice))
			}
		case kindNode:
			if v == nil {
				tx.DeleteNode(k.name)
			} else {
				tx.SetNode(v.(*model.Node))
			}
		case kindPod:
			if v == nil {
				tx.DeletePod(model.PodKey{Namespace: k.namespace, Name: k.name})
			} else {
				tx.SetPod(v.(*model.Pod))
			}
		}
	}
}

// apiObject is what the typed handlers accept: a pointer to a k8s.io/api object.
type apiObject interface {
	*corev1.Service | *discoveryv1.EndpointSlice | *corev1.Node | *corev1.Pod
	metav1.Object
}

// handler turns informer events for one resource into pending changes. convert
// returns the model object, or nil (with a reason) when the object is not
// represented, or an error when it cannot be converted.
type handler[T apiObject] struct {
	s       *Source
	kind    kind
	convert func(T) (obj any, skipReason string, err error)
}

func (s *Source) serviceHandler() cache.ResourceEventHandler {
	return &handler[*corev1.Service]{s: s, kind: kindService, convert: func(o *corev1.Service) (any, string, error) {
		v, err := model.ServiceFromAPI(o)
		return orNil(v, err), "", err
	}}
}

func (s *Source) sliceHandler() cache.ResourceEventHandler {
	return &handler[*discoveryv1.EndpointSlice]{s: s, kind: kindSlice, convert: func(o *discoveryv1.EndpointSlice) (any, string, error) {
		v, ok, err := model.EndpointSliceFromAPI(o)
		if err != nil {
			return nil, "", err
		}
		if !ok {
			return nil, "address type " + string(o.AddressType) + " or no " + discoveryv1.LabelServiceName + " label", nil
		}
		return v, "", nil
	}}
}

func (s *Source) nodeHandler() cache.ResourceEventHandler {
	return &handler[*corev1.Node]{s: s, kind: kindNode, convert: func(o *corev1.Node) (any, string, error) {
		v, err := model.NodeFromAPI(o)
		return orNil(v, err), "", err
	}}
}

func (s *Source) podHandler() cache.ResourceEventHandler {
	return &handler[*corev1.Pod]{s: s, kind: kindPod, convert: func(o *corev1.Pod) (any, string, error) {
		v, err := model.PodFromAPI(o)
		return orNil(v, err), "", err
	}}
}

// orNil returns v as an interface, or a nil interface (not a typed nil) on error.
func orNil[P any](v *P, err error) any {
	if err != nil || v == nil {
		return nil
	}
	return v
}

func (h *handler[T]) OnAdd(obj any, _ bool) { h.observe(obj, "add") }

// OnUpdate ignores updates that keep the resourceVersion: resyncs and relists
// re-deliver unchanged objects.
func (h *handler[T]) OnUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(T)
	n, ok2 := newObj.(T)
	if ok1 && ok2 && o.GetResourceVersion() != "" && o.GetResourceVersion() == n.GetResourceVersion() {
		return
	}
	h.observe(newObj, "update")
}

// OnDelete deletes by namespace/name, so it needs only the key of a tombstone
// (cache.DeletedFinalStateUnknown: the delete was missed during a disconnect and
// found by a relist).
func (h *handler[T]) OnDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		ns, name, err := cache.SplitMetaNamespaceKey(t.Key)
		if err != nil {
			h.s.log.Error(err, "Ignoring tombstone with a bad key", "kind", h.kind, "key", t.Key)
			return
		}
		h.s.log.V(5).Info("Event", "op", "delete", "kind", h.kind, "object", klog.KRef(ns, name), "tombstone", true)
		h.s.pending.put(objKey{h.kind, ns, name}, nil)
		return
	}
	o, ok := obj.(T)
	if !ok {
		h.s.log.Error(nil, "Ignoring delete of an unexpected type", "kind", h.kind, "type", typeName(obj))
		return
	}
	h.s.log.V(5).Info("Event", "op", "delete", "kind", h.kind, "object", klog.KObj(o))
	h.s.pending.put(objKey{h.kind, o.GetNamespace(), o.GetName()}, nil)
}

// observe converts obj and records its new state. An object that fails to convert
// or is not represented is recorded as deleted, so a previous good version leaves
// the store instead of going stale.
func (h *handler[T]) observe(obj any, op string) {
	o, ok := obj.(T)
	if !ok {
		h.s.log.Error(nil, "Ignoring object of an unexpected type", "kind", h.kind, "type", typeName(obj))
		return
	}
	k := objKey{h.kind, o.GetNamespace(), o.GetName()}
	h.s.log.V(5).Info("Event", "op", op, "kind", h.kind, "object", klog.KObj(o), "resourceVersion", o.GetResourceVersion())
	v, skip, err := h.convert(o)
	switch {
	case err != nil:
		h.s.log.Error(err, "Object left out: cannot convert it", "kind", h.kind, "object", klog.KRef(k.namespace, k.name))
	case v == nil:
		h.s.log.V(2).Info("Object left out: not represented", "kind", h.kind, "object", klog.KRef(k.namespace, k.name), "reason", skip)
	}
	h.s.pending.put(k, v)
}

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }

package kube

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// converted is what the informers cache in place of an API object (see
// transform): the object's namespace, name and resourceVersion (slimMeta), and
// the model object converted from it, or why it is not represented. The model
// store holds the same model object, so a cached object costs under a hundred
// bytes instead of a second, larger copy of the API object. Model objects are
// immutable, so copies share them.
type converted struct {
	slimMeta
	obj  any
	skip string // why obj is nil, when err is nil
	err  error
}

func (c *converted) DeepCopyObject() runtime.Object   { cp := *c; return &cp }
func (c *converted) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func newConverted(o metav1.Object, v any, skip string, err error) *converted {
	return &converted{slimMeta: metaOf(o), obj: v, skip: skip, err: err}
}

func convertService(o *corev1.Service) *converted {
	v, err := model.ServiceFromAPI(o)
	return newConverted(o, orNil(v, err), "", err)
}

func convertSlice(o *discoveryv1.EndpointSlice) *converted {
	v, ok, err := model.EndpointSliceFromAPI(o)
	switch {
	case err != nil:
		return newConverted(o, nil, "", err)
	case !ok:
		return newConverted(o, nil, "address type "+string(o.AddressType)+" or no "+discoveryv1.LabelServiceName+" label", nil)
	}
	return newConverted(o, v, "", nil)
}

func convertNode(o *corev1.Node) *converted {
	v, err := model.NodeFromAPI(o)
	return newConverted(o, orNil(v, err), "", err)
}

func convertPod(o *corev1.Pod) *converted {
	v, err := model.PodFromAPI(o)
	return newConverted(o, orNil(v, err), "", err)
}

// transform is the informers' transform: it converts each API object to the
// model once, before it enters the cache (client-go calls it on every added,
// updated or relisted object; an already converted one passes unchanged).
func transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return convertService(o), nil
	case *discoveryv1.EndpointSlice:
		return convertSlice(o), nil
	case *corev1.Node:
		return convertNode(o), nil
	case *corev1.Pod:
		return convertPod(o), nil
	}
	return obj, nil
}

// handler turns informer events for one resource into pending changes. It
// takes converted objects (from the informers) or API objects of type T,
// which it converts with convert.
type handler[T apiObject] struct {
	s       *Source
	kind    kind
	convert func(T) *converted
}

func (s *Source) serviceHandler() cache.ResourceEventHandler {
	return &handler[*corev1.Service]{s: s, kind: kindService, convert: convertService}
}

func (s *Source) sliceHandler() cache.ResourceEventHandler {
	return &handler[*discoveryv1.EndpointSlice]{s: s, kind: kindSlice, convert: convertSlice}
}

func (s *Source) nodeHandler() cache.ResourceEventHandler {
	return &handler[*corev1.Node]{s: s, kind: kindNode, convert: convertNode}
}

func (s *Source) podHandler() cache.ResourceEventHandler {
	return &handler[*corev1.Pod]{s: s, kind: kindPod, convert: convertPod}
}

// orNil returns v as an interface, or a nil interface (not a typed nil) on error.
func orNil[P any](v *P, err error) any {
	if err != nil || v == nil {
		return nil
	}
	return v
}

// toConverted returns obj as a converted object, or nil if it is of neither
// accepted type.
func (h *handler[T]) toConverted(obj any) *converted {
	switch o := obj.(type) {
	case *converted:
		return o
	case T:
		return h.convert(o)
	}
	return nil
}

func (h *handler[T]) OnAdd(obj any, _ bool) { h.observe(obj, "add") }

// OnUpdate ignores updates that keep the resourceVersion: resyncs and relists
// re-deliver unchanged objects.
func (h *handler[T]) OnUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
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
	o := h.toConverted(obj)
	if o == nil {
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
	o := h.toConverted(obj)
	if o == nil {
		h.s.log.Error(nil, "Ignoring object of an unexpected type", "kind", h.kind, "type", typeName(obj))
		return
	}
	k := objKey{h.kind, o.GetNamespace(), o.GetName()}
	h.s.log.V(5).Info("Event", "op", op, "kind", h.kind, "object", klog.KObj(o), "resourceVersion", o.GetResourceVersion())
	v, skip, err := o.obj, o.skip, o.err
	switch {
	case err != nil:
		h.s.log.Error(err, "Object left out: cannot convert it", "kind", h.kind, "object", klog.KRef(k.namespace, k.name))
	case v == nil:
		h.s.log.V(2).Info("Object left out: not represented", "kind", h.kind, "object", klog.KRef(k.namespace, k.name), "reason", skip)
	}
	h.s.pending.put(k, v)
}

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }

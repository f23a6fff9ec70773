package controlplane

import (
	"cmp"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A Reconciler applies a small change as one: when it is given back the
// State it returned, and what changed since its last call is a few
// Services and EndpointSlices that bear on nothing else, it patches its
// last Result instead of reconciling every object again. One Service added
// to 10,000 then costs what finding the change costs (a map lookup per
// object) instead of a whole reconcile (about 100 ms).
//
// The patched Result is the one Reconcile gives, because of what the
// change may not touch:
//   - each error of the last call is about its object alone (invalid, of
//     an unknown kind, a pool refused for its ranges), none a duplicate
//     or an allocation that met another Service's: every Service kept
//     holds all it was given and the State has one owner per address and
//     port. Its errors and warnings (a LoadBalancer pending, a pool in
//     conflict) then carry over as they were, as long as every object
//     given again keeps its origin (origins move when a document is added
//     before others) and the objects in error keep their order;
//   - the changed objects are valid, name no object given before, and are
//     Services that are not LoadBalancers nor default/kubernetes, or
//     EndpointSlices not labelled as a controller's and naming no
//     LoadBalancer Service: the load-balancer plan and the events cannot
//     change;
//   - in the namespace of a changed slice, or of a gone Service with a
//     selector, every slice the controller made got the first name it
//     derived (none was taken): which slice has which name does not depend
//     on the order they were made in, so a Service's slices are made alone
//     (the Pods and Nodes are the last call's) and a name freed frees
//     nobody else's; a name an added Service's slice derives must be free;
//   - the legacy Endpoints given (none) cannot be mirrored anew.
//
// Allocation is then exact. In Reconcile every Service first claims what
// the State gave it (phase 1), then what it asks for (phase 2), then what
// it still needs (phase 3), each phase in priority order. A Service given
// before holds all it has in phase 1 or 2 and needs nothing in phase 3; so
// the changed Services meet, phase by phase, exactly what the last call's
// allocator holds once the gone Services' holdings are released, as long
// as no claim of theirs meets one of another Service. Any such claim, or
// any error, and the Reconciler reconciles everything instead.
// FuzzReconciler holds the two equal.

// maxChange is the most objects added or gone that a Reconciler applies as
// a change.
const maxChange = 64

// since is what a Reconciler keeps of its last call to apply the next as a
// change; nil when that call cannot be patched.
type since struct {
	res Result
	now time.Time
	al  *allocator
	// gen counts calls; seen holds the call that last gave each object.
	gen  uint64
	seen map[runtime.Object]uint64
	// keys holds the kind, namespace and name of every object given.
	keys map[objectKey]string
	// sb makes the slices of the Services added, with the names taken, the
	// Pods and the Nodes of the last call.
	sb *sliceBuilder
	// owned holds the names of the slices made for each Service
	// (namespace/name).
	owned map[string][]string
	// origins holds every object's origin, and errSrcs the object of each
	// of res.Errors, when res has errors or warnings (nil otherwise): they
	// carry over only while the objects keep their origins and order.
	origins map[runtime.Object]string
	errSrcs []runtime.Object
}

// keep records a full reconcile's Result for the next call, when it can
// be patched.
func (r *Reconciler) keep(cfg Config, objs []Object, in *intake, res Result, now time.Time) {
	r.since = nil
	if in.relational || in.al == nil || in.sb == nil || len(in.endpoints) > 0 || cfg.WithDefaults().Validate() != nil {
		return
	}
	s := &since{res: res, now: now, al: in.al, gen: 1, seen: make(map[runtime.Object]uint64, len(objs)),
		keys: in.origins, sb: in.sb, owned: map[string][]string{}}
	for _, o := range objs {
		s.seen[o.Obj] = s.gen
	}
	if len(res.Errors) > 0 || len(res.Warnings) > 0 {
		s.origins = make(map[runtime.Object]string, len(objs))
		for _, o := range objs {
			s.origins[o.Obj] = o.Origin
		}
		for _, e := range in.errs.list {
			if e.idx < 0 || e.idx >= len(objs) {
				return // about an object the control plane made
			}
			s.errSrcs = append(s.errSrcs, objs[e.idx].Obj)
		}
	}
	for _, sl := range res.EndpointSlices {
		if sl.Labels[discoveryv1.LabelManagedBy] == controllerEndpointSlice {
			key := sl.Namespace + "/" + sl.Labels[discoveryv1.LabelServiceName]
			s.owned[key] = append(s.owned[key], sl.Name)
		}
	}
	r.since = s
}

func controllerMade(sl *discoveryv1.EndpointSlice) bool {
	switch sl.Labels[discoveryv1.LabelManagedBy] {
	case controllerEndpointSlice, controllerEndpointSliceMirroring:
		return true
	}
	return false
}

// sameMap reports whether a and b are the same map (not merely equal).
func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// change is the Reconciler's last Result patched with what changed since
// its last call; ok is false when the change cannot be applied so (see
// above), and the Reconciler must reconcile everything. It then keeps
// nothing of its last call.
func (r *Reconciler) change(objs []Object, prev State, now time.Time) (res Result, ok bool) {
	s := r.since
	r.since = nil // kept again below when the change applies
	if s == nil || !sameMap(prev.Services, s.res.State.Services) || !sameMap(prev.Created, s.res.State.Created) ||
		!sameMap(prev.Pools, s.res.State.Pools) {
		return Result{}, false
	}
	now = now.UTC().Truncate(time.Second)
	s.gen++
	var added []Object
	kept := 0
	var errAt map[runtime.Object]int
	if len(s.errSrcs) > 0 {
		errAt = make(map[runtime.Object]int, len(s.errSrcs))
		for _, src := range s.errSrcs {
			errAt[src] = -1
		}
	}
	for i, o := range objs {
		switch g, ok := s.seen[o.Obj]; {
		case !ok:
			if added = append(added, o); len(added) > maxChange {
				return Result{}, false
			}
		case g == s.gen:
			return Result{}, false // given twice: a duplicate
		case s.origins != nil && s.origins[o.Obj] != o.Origin:
			return Result{}, false // moved: the errors and warnings name origins
		default:
			s.seen[o.Obj] = s.gen
			kept++
			if _, ok := errAt[o.Obj]; ok {
				errAt[o.Obj] = i
			}
		}
	}
	// The objects in error, all given again, must come in the same order.
	for i, src := range s.errSrcs {
		if errAt[src] < 0 || (i > 0 && errAt[src] < errAt[s.errSrcs[i-1]]) {
			return Result{}, false
		}
	}
	var gone []runtime.Object
	if kept < len(s.seen) {
		if len(s.seen)-kept > maxChange {
			return Result{}, false
		}
		for src, g := range s.seen {
			if g != s.gen {
				gone = append(gone, src)
			}
		}
	}
	c := &changeSet{s: s, prev: prev, now: now, memo: &r.memo}
	if !c.remove(gone) || !c.add(added) || !c.allocate() {
		return Result{}, false
	}
	res = c.result()
	for _, src := range gone {
		delete(s.seen, src)
		delete(r.memo.last, src)
		if s.origins != nil {
			delete(s.origins, src)
		}
	}
	for _, o := range added {
		s.seen[o.Obj] = s.gen
		if s.origins != nil {
			s.origins[o.Obj] = o.Origin
		}
	}
	for src, e := range c.remembered {
		r.memo.last[src] = e
	}
	s.res, s.now = res, now
	r.since = s
	r.changes++
	return res, true
}

// changeSet is one change being applied to a since.
type changeSet struct {
	s    *since
	prev State
	now  time.Time
	memo *memo
	// goneSvcs and goneSlices are the keys (namespace/name) of the Services
	// and slices gone; svcs and slices the ones added, prepared.
	goneSvcs, goneSlices []string
	goneKeys             []objectKey
	// made are the slices made for the added Services.
	made       []*discoveryv1.EndpointSlice
	svcs       []*svcAlloc
	slices     []*discoveryv1.EndpointSlice
	remembered map[runtime.Object]*remembered
	addedKeys  map[objectKey]string
}

// remove takes the gone objects out: each must be a Service or slice the
// Reconciler prepared (so valid) that bears on nothing else.
func (c *changeSet) remove(gone []runtime.Object) bool {
	for _, src := range gone {
		e := c.memo.last[src]
		if e == nil || e.prep == nil {
			return false
		}
		switch o := e.prep.(type) {
		case *corev1.Service:
			if !c.plainService(o) || (hasSlicesMade(o) && c.s.sb.names.bumped[o.Namespace]) {
				return false
			}
			key := serviceKey(o)
			c.goneSvcs = append(c.goneSvcs, key)
			c.goneKeys = append(c.goneKeys, objectKey{kindService, o.Namespace, o.Name})
			for _, name := range c.s.owned[key] {
				delete(c.s.sb.names.taken, o.Namespace+"/"+name)
			}
		case *discoveryv1.EndpointSlice:
			if !c.plainSlice(o) {
				return false
			}
			c.goneSlices = append(c.goneSlices, o.Namespace+"/"+o.Name)
			c.goneKeys = append(c.goneKeys, objectKey{kindEndpointSlice, o.Namespace, o.Name})
			delete(c.s.sb.names.taken, o.Namespace+"/"+o.Name)
		default:
			return false
		}
	}
	return true
}

// hasSlicesMade reports whether the endpointslice controller makes slices
// for svc.
func hasSlicesMade(svc *corev1.Service) bool {
	return svc.Spec.Selector != nil && svc.Spec.Type != corev1.ServiceTypeExternalName
}

// plainService reports whether svc bears on no other object's allocation
// or status: not a LoadBalancer, not default/kubernetes.
func (c *changeSet) plainService(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeLoadBalancer && !isKubernetesService(svc)
}

// plainSlice reports whether sl bears on no other object: no controller's
// slice has a name that depends on the order slices were made in in its
// namespace, it is not labelled as a controller's, and the Service it
// names is no LoadBalancer.
func (c *changeSet) plainSlice(sl *discoveryv1.EndpointSlice) bool {
	if c.s.sb.names.bumped[sl.Namespace] || controllerMade(sl) {
		return false
	}
	name, ok := sl.Labels[discoveryv1.LabelServiceName]
	if !ok {
		return true
	}
	svc := findSorted(c.s.res.Services, sl.Namespace, name)
	return svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer
}

// findSorted returns the object of list (sorted by namespace/name) named
// namespace/name, nil if none.
func findSorted[T metav1.Object](list []T, namespace, name string) T {
	if i, ok := searchSorted(list, namespace, name); ok {
		return list[i]
	}
	var zero T
	return zero
}

func searchSorted[T metav1.Object](list []T, namespace, name string) (int, bool) {
	return slices.BinarySearchFunc(list, [2]string{namespace, name}, func(o T, k [2]string) int {
		return cmp.Or(strings.Compare(o.GetNamespace(), k[0]), strings.Compare(o.GetName(), k[1]))
	})
}

// add prepares the added objects: each must be a valid Service or slice
// that bears on nothing else and names no object still given.
func (c *changeSet) add(added []Object) bool {
	c.remembered = map[runtime.Object]*remembered{}
	c.addedKeys = map[objectKey]string{}
	gone := map[objectKey]bool{}
	for _, k := range c.goneKeys {
		gone[k] = true
	}
	families := c.s.al.families
	for _, o := range added {
		kind, m, ok := classify(o.Obj, false)
		if !ok || m.GetName() == "" {
			return false
		}
		key := objectKey{kind, m.GetNamespace(), m.GetName()}
		if _, taken := c.s.keys[key]; (taken && !gone[key]) || c.addedKeys[key] != "" {
			return false
		}
		c.addedKeys[key] = o.Origin
		switch obj := m.(type) {
		case *corev1.Service:
			prepareServiceForCreate(obj)
			if len(validateServiceCreate(obj)) > 0 || len(initIPFamilyFields(obj, families)) > 0 || !c.plainService(obj) {
				return false
			}
			c.remembered[o.Obj] = &remembered{validated: true, prep: workingCopy(obj)}
			var prior *ServiceAlloc
			if p, ok := c.prev.Services[serviceKey(obj)]; ok {
				prior = &p
			}
			c.svcs = append(c.svcs, newSvcAlloc(obj, prior))
		case *discoveryv1.EndpointSlice:
			prepareSlice(obj)
			if len(validateSlice(obj)) > 0 {
				return false
			}
			if obj.UID == "" {
				obj.UID = makeUID(kindEndpointSlice, obj.Namespace, obj.Name)
			}
			if !c.plainSlice(obj) || c.s.sb.names.taken[obj.Namespace+"/"+obj.Name] {
				return false
			}
			c.s.sb.names.take(obj.Namespace, obj.Name)
			c.remembered[o.Obj] = &remembered{validated: true, prep: workingCopy(obj)}
			c.slices = append(c.slices, obj)
		default:
			return false
		}
	}
	slices.SortFunc(c.svcs, func(a, b *svcAlloc) int { return compareServicePriority(a.svc, b.svc) })
	return true
}

// allocate releases what the gone Services held and allocates for the
// added ones, phase by phase in priority order, as Reconcile would.
func (c *changeSet) allocate() bool {
	al := c.s.al
	for _, key := range c.goneSvcs {
		if p, ok := c.prev.Services[key]; ok {
			release(al, key, p)
		}
	}
	for _, a := range c.svcs {
		if !al.claimPrior(a) {
			return false
		}
	}
	for _, a := range c.svcs {
		if al.claimRequested(a) != nil {
			return false
		}
	}
	for _, a := range c.svcs {
		if al.allocateDynamic(a) != nil {
			return false
		}
		a.finish()
	}
	// The slices of the added Services, made with what the last call had,
	// each under the first name it derives.
	for _, a := range c.svcs {
		stampService(a.svc, a.prior, c.now)
		if !hasSlicesMade(a.svc) {
			continue
		}
		made := c.s.sb.forService(a.svc)
		if c.s.sb.names.bumped[a.svc.Namespace] {
			return false
		}
		c.made = append(c.made, made...)
	}
	return true
}

// release frees everything a Service of key held by prior.
func release(al *allocator, key string, prior ServiceAlloc) {
	a := &svcAlloc{key: key}
	for _, s := range prior.ClusterIPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			if r := al.ranges[familyOf(s)]; r != nil {
				r.release(ip, a.ipOwner())
			}
		}
	}
	for k, np := range prior.NodePorts {
		al.ports.release(np, a.nodePortOwner(portOfKey(k)))
	}
	if prior.HealthCheckNodePort != 0 {
		al.ports.release(prior.HealthCheckNodePort, a.healthOwner())
	}
}

// result is the last Result with the change applied.
func (c *changeSet) result() Result {
	last := c.s.res
	res := Result{
		Pods: slices.Clone(last.Pods), Nodes: slices.Clone(last.Nodes), Namespaces: slices.Clone(last.Namespaces),
		Pools: slices.Clone(last.Pools), Events: slices.Clone(last.Events),
		Errors: slices.Clone(last.Errors), Warnings: slices.Clone(last.Warnings),
		State: State{Services: maps.Clone(c.prev.Services), Created: maps.Clone(c.prev.Created), Pools: maps.Clone(c.prev.Pools)},
	}
	if !c.now.Equal(c.s.now) {
		for i := range res.Events {
			restamp(&res.Events[i], c.now)
		}
	}
	if res.State.Services == nil {
		res.State.Services = map[string]ServiceAlloc{}
	}
	if res.State.Created == nil {
		res.State.Created = map[string]time.Time{}
	}
	res.Services = slices.Clone(last.Services)
	res.EndpointSlices = slices.Clone(last.EndpointSlices)
	for _, key := range c.goneSvcs {
		ns, name, _ := strings.Cut(key, "/")
		if i, ok := searchSorted(res.Services, ns, name); ok {
			res.Services = slices.Delete(res.Services, i, i+1)
		}
		delete(res.State.Services, key)
		for _, sl := range c.s.owned[key] {
			if i, ok := searchSorted(res.EndpointSlices, ns, sl); ok {
				res.EndpointSlices = slices.Delete(res.EndpointSlices, i, i+1)
			}
			delete(res.State.Created, kindEndpointSlice+"/"+ns+"/"+sl)
		}
		delete(c.s.owned, key)
	}
	for _, a := range c.svcs {
		a.svc.Status = corev1.ServiceStatus{}
		res.State.Services[a.key] = a.stateEntry()
		i, _ := searchSorted(res.Services, a.svc.Namespace, a.svc.Name)
		res.Services = slices.Insert(res.Services, i, a.svc)
	}
	for _, key := range c.goneSlices {
		ns, name, _ := strings.Cut(key, "/")
		if i, ok := searchSorted(res.EndpointSlices, ns, name); ok {
			res.EndpointSlices = slices.Delete(res.EndpointSlices, i, i+1)
		}
		delete(res.State.Created, kindEndpointSlice+"/"+key)
	}
	for _, sl := range c.made {
		key := sl.Namespace + "/" + sl.Labels[discoveryv1.LabelServiceName]
		c.s.owned[key] = append(c.s.owned[key], sl.Name)
	}
	added := append(slices.Clone(c.slices), c.made...)
	stampCreated(c.prev.Created, c.now, kindEndpointSlice, added, res.State.Created)
	for _, sl := range added {
		i, _ := searchSorted(res.EndpointSlices, sl.Namespace, sl.Name)
		res.EndpointSlices = slices.Insert(res.EndpointSlices, i, sl)
	}
	for _, k := range c.goneKeys {
		delete(c.s.keys, k)
	}
	maps.Copy(c.s.keys, c.addedKeys)
	for _, e := range c.remembered {
		e.out = c.outOf(e.prep)
	}
	return res
}

// outOf is the object of the change's Result made from prep.
func (c *changeSet) outOf(prep metav1.Object) metav1.Object {
	switch p := prep.(type) {
	case *corev1.Service:
		for _, a := range c.svcs {
			if a.svc.Namespace == p.Namespace && a.svc.Name == p.Name {
				return a.svc
			}
		}
	case *discoveryv1.EndpointSlice:
		for _, sl := range c.slices {
			if sl.Namespace == p.Namespace && sl.Name == p.Name {
				return sl
			}
		}
	}
	return nil
}

// restamp gives ev, made by newEvent, the time now.
func restamp(ev *corev1.Event, now time.Time) {
	t := metav1.NewTime(now)
	ev.Name = eventName(ev.InvolvedObject.Name, now)
	ev.FirstTimestamp, ev.LastTimestamp = t, t
}

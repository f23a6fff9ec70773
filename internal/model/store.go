package model

import (
	"slices"
	"strings"
	"sync"
)

// Store holds the current Snapshot and fans changes out to subscribers. Sources write
// through Update; consumers read Snapshot or Subscribe. It is safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	snap *Snapshot
	subs map[*Subscription]struct{}
}

// NewStore returns a Store with an empty, unsynced snapshot.
func NewStore() *Store {
	return &Store{snap: emptySnapshot(), subs: map[*Subscription]struct{}{}}
}

// Snapshot returns the current snapshot.
func (s *Store) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

// Update runs fn on a transaction over the current snapshot and, if fn changed
// anything, publishes the result as one new snapshot and notifies subscribers. The
// objects passed to the Txn become part of the model and must not be modified after.
// fn must not call back into the Store.
func (s *Store) Update(fn func(tx *Txn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &Txn{base: s.snap, touched: map[ServiceKey]bool{}}
	fn(tx)
	next, changes := tx.commit()
	if next == nil {
		return
	}
	s.snap = next
	for sub := range s.subs {
		sub.push(next, changes)
	}
}

// Subscribe returns a subscription whose first Next returns the current snapshot with
// every known object as a change (Old nil), so a consumer starts with a full sync.
func (s *Store) Subscribe() *Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := &Subscription{store: s, notify: make(chan struct{}, 1), pending: newChangeSet(), snap: s.snap}
	sub.pending.merge(initialChanges(s.snap))
	sub.notify <- struct{}{}
	s.subs[sub] = struct{}{}
	return sub
}

// Subscription delivers the net changes since the previous Next. Changes of one key
// made between two calls are merged into a single (old, new) pair, so a slow consumer
// sees the net effect, never a backlog.
type Subscription struct {
	store   *Store
	notify  chan struct{}
	mu      sync.Mutex
	pending *changeSet
	snap    *Snapshot
}

// C is signalled (at most one pending signal) whenever Next has something new.
func (sub *Subscription) C() <-chan struct{} { return sub.notify }

// Next returns the latest snapshot and the changes since the previous call.
func (sub *Subscription) Next() (*Snapshot, Changes) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.snap, sub.pending.take()
}

// Close stops deliveries; C is never signalled again.
func (sub *Subscription) Close() {
	sub.store.mu.Lock()
	delete(sub.store.subs, sub)
	sub.store.mu.Unlock()
}

func (sub *Subscription) push(snap *Snapshot, c Changes) {
	sub.mu.Lock()
	sub.snap = snap
	sub.pending.merge(c)
	sub.mu.Unlock()
	select {
	case sub.notify <- struct{}{}:
	default:
	}
}

func initialChanges(s *Snapshot) Changes {
	var c Changes
	for _, st := range s.Services() {
		c.Services = append(c.Services, ServiceChange{Key: st.Service.Key(), New: st})
	}
	for _, n := range s.Nodes() {
		c.Nodes = append(c.Nodes, NodeChange{Name: n.Name, New: n})
	}
	for _, p := range s.Pods() {
		c.Pods = append(c.Pods, PodChange{Key: p.Key(), New: p})
	}
	return c
}

// Txn collects writes against a base snapshot. Maps are copied on first write, shard
// by shard (cowmap.Map), so the base snapshot is never modified.
type Txn struct {
	base    *Snapshot
	next    *Snapshot
	touched map[ServiceKey]bool // Services whose Service or slices were written
	changes Changes
	synced  *bool
	// slicesDirty is set when the stored slices changed, visibly or not: a slice of a
	// Service not (yet) known changes no consumer's view but must still be kept.
	slicesDirty bool
}

func (tx *Txn) writable() *Snapshot {
	if tx.next == nil {
		b := tx.base
		tx.next = &Snapshot{
			Revision:      b.Revision,
			Synced:        b.Synced,
			services:      b.services.Clone(),
			slices:        b.slices.Clone(),
			nodes:         b.nodes.Clone(),
			pods:          b.pods.Clone(),
			loadBalancers: b.loadBalancers.Clone(),
		}
	}
	return tx.next
}

// state returns a private copy of the ServiceState for k in the next snapshot.
func (tx *Txn) state(k ServiceKey) *ServiceState {
	n := tx.writable()
	if !tx.touched[k] {
		tx.touched[k] = true
		st := &ServiceState{}
		if old := n.services.Get(k); old != nil {
			*st = *old
			st.Slices = slices.Clone(old.Slices)
		}
		n.services.Set(k, st)
	}
	return n.services.Get(k)
}

// SetService adds or replaces a Service.
func (tx *Txn) SetService(svc *Service) {
	if old := tx.current().services.Get(svc.Key()); old != nil && old.Service.Equal(svc) {
		return
	}
	tx.state(svc.Key()).Service = svc
}

// DeleteService removes a Service; its slices stay until they are deleted.
func (tx *Txn) DeleteService(k ServiceKey) {
	if tx.current().services.Get(k) == nil {
		return
	}
	tx.state(k).Service = nil
}

// SetEndpointSlice adds or replaces a slice (matched by namespace/name).
func (tx *Txn) SetEndpointSlice(sl *EndpointSlice) {
	if old := tx.current().slices.Get(ServiceKey{sl.Namespace, sl.Name}); old != nil && old.Equal(sl) {
		return
	}
	tx.DeleteEndpointSlice(sl.Namespace, sl.Name)
	tx.slicesDirty = true
	n := tx.writable()
	n.slices.Set(ServiceKey{sl.Namespace, sl.Name}, sl)
	st := tx.state(sl.ServiceKey())
	i, _ := slices.BinarySearchFunc(st.Slices, sl.Name, func(e *EndpointSlice, name string) int { return strings.Compare(e.Name, name) })
	st.Slices = slices.Insert(st.Slices, i, sl)
}

// DeleteEndpointSlice removes a slice by namespace/name; unknown slices are ignored.
func (tx *Txn) DeleteEndpointSlice(namespace, name string) {
	k := ServiceKey{namespace, name}
	old := tx.current().slices.Get(k)
	if old == nil {
		return
	}
	tx.writable().slices.Del(k)
	tx.slicesDirty = true
	st := tx.state(old.ServiceKey())
	st.Slices = slices.DeleteFunc(st.Slices, func(e *EndpointSlice) bool { return e.Name == name })
	if len(st.Slices) == 0 {
		st.Slices = nil // as a Service never given a slice: the state does not tell its history
	}
}

// SetNode adds or replaces a Node.
func (tx *Txn) SetNode(n *Node) {
	old := tx.current().nodes.Get(n.Name)
	tx.writable().nodes.Set(n.Name, n)
	tx.changes.Nodes = append(tx.changes.Nodes, NodeChange{Name: n.Name, Old: old, New: n})
}

// DeleteNode removes a Node by name.
func (tx *Txn) DeleteNode(name string) {
	old := tx.current().nodes.Get(name)
	if old == nil {
		return
	}
	tx.writable().nodes.Del(name)
	tx.changes.Nodes = append(tx.changes.Nodes, NodeChange{Name: name, Old: old})
}

// SetPod adds or replaces a Pod.
func (tx *Txn) SetPod(p *Pod) {
	old := tx.current().pods.Get(p.Key())
	tx.writable().pods.Set(p.Key(), p)
	tx.changes.Pods = append(tx.changes.Pods, PodChange{Key: p.Key(), Old: old, New: p})
}

// DeletePod removes a Pod.
func (tx *Txn) DeletePod(k PodKey) {
	old := tx.current().pods.Get(k)
	if old == nil {
		return
	}
	tx.writable().pods.Del(k)
	tx.changes.Pods = append(tx.changes.Pods, PodChange{Key: k, Old: old})
}

// SetSynced marks whether the source has delivered its initial state.
func (tx *Txn) SetSynced(v bool) { tx.synced = &v }

// Replace makes the snapshot hold exactly the given objects: whatever is not listed
// is deleted. Unchanged objects produce no change.
func (tx *Txn) Replace(services []*Service, eps []*EndpointSlice, nodes []*Node, pods []*Pod) {
	cur := tx.current()
	keepSvc := map[ServiceKey]bool{}
	for _, s := range services {
		keepSvc[s.Key()] = true
	}
	for k, st := range cur.services.All() {
		if st.Service != nil && !keepSvc[k] {
			tx.DeleteService(k)
		}
	}
	keepSl := map[ServiceKey]bool{}
	for _, sl := range eps {
		keepSl[ServiceKey{sl.Namespace, sl.Name}] = true
	}
	for k := range cur.slices.All() {
		if !keepSl[k] {
			tx.DeleteEndpointSlice(k.Namespace, k.Name)
		}
	}
	keepNode := map[string]bool{}
	for _, n := range nodes {
		keepNode[n.Name] = true
	}
	for name := range cur.nodes.All() {
		if !keepNode[name] {
			tx.DeleteNode(name)
		}
	}
	keepPod := map[PodKey]bool{}
	for _, p := range pods {
		keepPod[p.Key()] = true
	}
	for k := range cur.pods.All() {
		if !keepPod[k] {
			tx.DeletePod(k)
		}
	}
	for _, s := range services {
		tx.SetService(s)
	}
	for _, sl := range eps {
		tx.SetEndpointSlice(sl)
	}
	for _, n := range nodes {
		tx.SetNode(n)
	}
	for _, p := range pods {
		tx.SetPod(p)
	}
}

func (tx *Txn) current() *Snapshot {
	if tx.next != nil {
		return tx.next
	}
	return tx.base
}

// commit finishes the transaction: it returns nil when nothing observable changed.
func (tx *Txn) commit() (*Snapshot, Changes) {
	syncChanged := tx.synced != nil && *tx.synced != tx.base.Synced
	if tx.next == nil && !syncChanged {
		return nil, Changes{}
	}
	n := tx.writable()
	if tx.synced != nil {
		n.Synced = *tx.synced
	}
	for k := range tx.touched {
		st := n.services.Get(k)
		if st.Service == nil && len(st.Slices) == 0 {
			n.services.Del(k)
		}
		if st.Service != nil && st.Service.Type == ServiceTypeLoadBalancer {
			n.loadBalancers.Set(k, struct{}{})
		} else {
			n.loadBalancers.Del(k)
		}
		tx.changes.Services = append(tx.changes.Services, ServiceChange{Key: k, Old: visible(tx.base.services.Get(k)), New: visible(n.services.Get(k))})
	}
	cs := newChangeSet()
	cs.merge(tx.changes)
	changes := cs.take()
	if changes.Empty() && !syncChanged && !tx.slicesDirty {
		return nil, Changes{}
	}
	n.Revision = tx.base.Revision + 1
	return n, changes
}

// visible hides states that have slices but no Service: consumers see a Service only.
func visible(st *ServiceState) *ServiceState {
	if st == nil || st.Service == nil {
		return nil
	}
	return st
}

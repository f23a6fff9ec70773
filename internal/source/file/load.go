package file

import (
	"fmt"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/model"
)

// Options say where the manifests are and how the control plane is configured.
type Options struct {
	// Path is a manifest file or a directory of them.
	Path string
	// StatePath is where allocations persist; default StatePathFor(Path).
	StatePath string
	// ReadOnly loads without writing the state file (e.g. `svcnet get`, which must
	// not change what a running agent allocated). Allocations are still computed.
	ReadOnly bool
	Config   controlplane.Config
	// ServiceProxyName keeps only the Services (and their slices) whose label
	// service.kubernetes.io/service-proxy-name equals it; when empty, only those
	// without the label, as the kube source and kube-proxy do.
	ServiceProxyName string
	// AllServices keeps every Service whatever its service-proxy-name label
	// (ServiceProxyName is then ignored): cluster DNS names them all.
	AllServices bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Cache, when not nil, keeps decoded documents from one load to the
	// next (see Cache); a long-running reader keeps one.
	Cache *Cache
	// ResultOnly leaves Loaded's Objects and model lists empty, for a
	// reader of the API objects alone (svcnet get): without a Cache, the
	// control plane takes the decoded manifests rather than copies of
	// them (controlplane.Scope), and a load of some kinds that leaves out
	// the EndpointSlices builds none.
	ResultOnly bool
	// Kinds, when not empty, are the only kinds the load reads (see
	// KindsFor): documents of other kinds are neither decoded nor
	// reconciled, so neither is in Errors, and the state persisted keeps
	// what it held of them. For a one-shot reader only: not with Cache.
	Kinds []string
	// Metrics, when not nil, count a Source's whole reads and journal
	// records.
	Metrics *Metrics
}

// Loaded is one load of the manifests: the control plane's result as API objects,
// the same converted to the model, and every error met on the way.
type Loaded struct {
	// Objects are the decoded manifests, as written, in file order: the
	// control plane's input.
	Objects []controlplane.Object
	API     controlplane.Result
	// Errors lists documents that did not decode, objects the control plane left
	// out, and objects that did not convert, in file order. Each names its origin.
	Errors []error
	// Warnings are about objects kept but not fully served (a LoadBalancer
	// Service pending its IP), each naming its origin.
	Warnings []error

	Services       []*model.Service
	EndpointSlices []*model.EndpointSlice
	Nodes          []*model.Node
	Pods           []*model.Pod

	proxyName string
	all       bool
	// took is how long the load's steps took.
	took loadTimes
	// persist writes the state file; nil when the load was read-only.
	persist func() error
	// cache writes the decode cache the load filled; nil when there is
	// none to write.
	cache *diskCache
}

// writeCache writes the decode cache of the load (once). A cache that
// cannot be written (a read-only directory) is only slower next time.
func (l *Loaded) writeCache() {
	if l.cache != nil {
		_ = l.cache.write()
		l.cache = nil
	}
}

// persistState writes the allocations of the load (once); nothing for a
// read-only load.
func (l *Loaded) persistState() error {
	if l.persist == nil {
		return nil
	}
	err := l.persist()
	l.persist = nil
	return err
}

// ReadManifests decodes every manifest at path (a file or a directory) without
// running the control plane: the objects as written, and the documents that did not
// decode. It fails only when the files cannot be read.
func ReadManifests(path string) ([]controlplane.Object, []error, error) {
	files, err := manifestFiles(path)
	if err != nil {
		return nil, nil, err
	}
	return readFiles(files, nil)
}

// readFiles decodes files, through c when it is not nil.
func readFiles(files []string, c *Cache) ([]controlplane.Object, []error, error) {
	if c == nil {
		c = &Cache{}
	}
	c.begin()
	reads := make([]fileRead, len(files))
	for i, f := range files {
		r, err := c.read(f)
		if err != nil {
			c.abort()
			c.recycle(reads)
			return nil, nil, fmt.Errorf("reading manifests: %w", err)
		}
		reads[i] = r
	}
	c.prefetch(reads)
	var objs []controlplane.Object
	var errs []error
	for _, r := range reads {
		d := c.decodeRead(r)
		objs = append(objs, d.objs...)
		errs = append(errs, d.errs...)
	}
	c.pre = prefetched{}
	c.end()
	c.recycle(reads)
	return objs, errs, nil
}

// Load reads every manifest, reconciles it against the persisted state and, unless
// ReadOnly, persists the new state. It fails only when the manifests or the state
// cannot be read or the state cannot be written; invalid objects are in Errors.
func Load(opts Options) (*Loaded, error) { return load(opts, false) }

// load is Load; with deferState it leaves the state file to
// Loaded.persistState and the decode cache to Loaded.writeCache, so that a
// reader can serve what it loaded first.
// That is safe because Reconcile is deterministic: a load after a crash
// that lost the state's writing reconciles the same manifests against the
// state before it and allocates the same addresses.
func load(opts Options, deferState bool) (*Loaded, error) {
	files, err := manifestFiles(opts.Path)
	if err != nil {
		return nil, err
	}
	statePath := opts.StatePath
	if statePath == "" {
		statePath = StatePathFor(opts.Path)
	}
	cache := opts.Cache
	if cache == nil {
		cache = &Cache{only: newKindFilter(opts.Kinds)} // for this load only: it keeps nothing
	} else if len(opts.Kinds) > 0 {
		return nil, fmt.Errorf("loading %s: a load of some kinds keeps no Cache", opts.Path)
	}
	// A load through a Cache reads the state first, so that one that
	// fails leaves the Cache as it was. A one-shot load reads it after the
	// manifests, so that it never holds the state's maps (3 MB at 10,000
	// Services) beside the manifests' bytes and the disk cache's, where
	// its heap was largest.
	var prev controlplane.State
	if opts.Cache != nil {
		if prev, err = cache.readState(statePath); err != nil {
			return nil, err
		}
	}
	first := !cache.loaded
	if first {
		cache.disk = openDiskCache(DecodedPathFor(opts.Path))
		cache.disk.keep = !opts.ReadOnly
	}
	start := time.Now()
	objs, errs, err := readFiles(files, cache)
	read := time.Since(start)
	var disk *diskCache // to write
	if first {
		if err == nil && cache.disk.keep && cache.disk.worthWriting() {
			disk = cache.disk
		}
		cache.disk = nil
		cache.loaded = err == nil
		cache.fresh = 0
	} else if err == nil && opts.Cache != nil && !opts.ReadOnly {
		disk = cache.refreshDisk(DecodedPathFor(opts.Path))
	}
	if err != nil {
		return nil, err
	}
	if cache.only.everything(objs) {
		all := opts
		all.Kinds = nil
		return load(all, deferState)
	}
	if opts.Cache == nil {
		if prev, err = cache.readState(statePath); err != nil {
			return nil, err
		}
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	var res controlplane.Result
	switch {
	case opts.Cache != nil:
		res = cache.reconciler.Reconcile(opts.Config, objs, prev, now())
	case opts.ResultOnly:
		// Nothing reads the decoded objects after the control plane but
		// the decode cache, which encodes them first. A load that writes
		// it writes it now (its content is the documents', whatever the
		// control plane makes of them), so that the encodings are let go
		// before reconciling: 3 MB at 10,000 Services.
		if disk != nil {
			disk.encode()
			if !opts.ReadOnly && !deferState {
				_ = disk.write() // a cache not written is only slower next time
				disk = nil
			}
		}
		scope := controlplane.Scope{Owned: true, NoEndpointSlices: cache.only != nil && !cache.only["EndpointSlice"]}
		res = controlplane.ReconcileScoped(opts.Config, objs, prev, now(), scope)
		objs = nil
	default:
		res = controlplane.Reconcile(opts.Config, objs, prev, now())
	}
	reconciled := time.Since(start)
	res.State = cache.only.keepOthers(res.State, prev)
	for _, e := range res.Errors {
		errs = append(errs, e)
	}
	l := &Loaded{Objects: objs, API: res, Errors: errs, proxyName: opts.ServiceProxyName, all: opts.AllServices}
	l.took.read, l.took.reconcile = read, reconciled-read
	if !opts.ReadOnly {
		l.persist = func() error {
			if opts.Cache == nil && res.State.Equal(prev) {
				return nil // the file holds it: a one-shot load read it there
			}
			return cache.writeState(statePath, res.State)
		}
		l.cache = disk
		if !deferState {
			persisting := time.Now()
			if err := l.persistState(); err != nil {
				return nil, err
			}
			l.writeCache()
			l.took.persist = time.Since(persisting)
		}
	}
	for _, w := range res.Warnings {
		l.Warnings = append(l.Warnings, w)
	}
	if opts.ResultOnly {
		l.Objects = nil
		return l, nil
	}
	converting := time.Now()
	if opts.Cache != nil {
		cache.models.begin(len(res.Services), len(res.EndpointSlices))
		l.convert(&cache.models)
		cache.models.end()
	} else {
		l.convert(nil)
	}
	l.took.convert = time.Since(converting)
	return l, nil
}

// loadTimes are the durations of a load's steps: reading and decoding the
// manifests, reconciling them, writing the state (and decode cache) when
// the load did, converting the result to the model.
type loadTimes struct{ read, reconcile, persist, convert time.Duration }

// Timings are the durations of the load's steps, as key and value pairs
// for a log line: read, reconcile, persist (zero when the load left the
// state to its caller), convert.
func (l *Loaded) Timings() []any {
	return []any{"read", l.took.read, "reconcile", l.took.reconcile, "persist", l.took.persist, "convert", l.took.convert}
}

// convert fills the model lists from the API objects, through m when it is
// not nil; an object that does not convert is reported and left out.
func (l *Loaded) convert(m *modelMemo) {
	skip := map[model.ServiceKey]bool{}
	for _, s := range l.API.Services {
		if !l.all && s.Labels[model.LabelServiceProxyName] != l.proxyName {
			skip[model.ServiceKey{Namespace: s.Namespace, Name: s.Name}] = true
			continue
		}
		if svc, err := m.service(s); err != nil {
			l.Errors = append(l.Errors, err)
		} else {
			l.Services = append(l.Services, svc)
		}
	}
	for _, s := range l.API.EndpointSlices {
		if sl, ok, err := m.slice(s); err != nil {
			l.Errors = append(l.Errors, err)
		} else if ok && !skip[sl.ServiceKey()] {
			l.EndpointSlices = append(l.EndpointSlices, sl)
		}
	}
	for _, n := range l.API.Nodes {
		if m, err := model.NodeFromAPI(n); err != nil {
			l.Errors = append(l.Errors, err)
		} else {
			l.Nodes = append(l.Nodes, m)
		}
	}
	for _, p := range l.API.Pods {
		if m, err := model.PodFromAPI(p); err != nil {
			l.Errors = append(l.Errors, err)
		} else {
			l.Pods = append(l.Pods, m)
		}
	}
}

// apply makes the store hold exactly what was loaded.
func (l *Loaded) apply(store *model.Store) {
	store.Update(func(tx *model.Txn) {
		tx.Replace(l.Services, l.EndpointSlices, l.Nodes, l.Pods)
		tx.SetSynced(true)
	})
}

// FromResult converts a control plane's result (for example one listed from a
// real API server) to the model as Load does, keeping the Services of
// proxyName ("" for those without the service-proxy-name label).
func FromResult(res controlplane.Result, proxyName string) *Loaded {
	l := &Loaded{API: res, proxyName: proxyName}
	l.convert(nil)
	return l
}

// Snapshot returns the load as one synced model snapshot.
func (l *Loaded) Snapshot() *model.Snapshot {
	store := model.NewStore()
	l.apply(store)
	return store.Snapshot()
}

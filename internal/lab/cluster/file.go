package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/describe"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/source/file"
)

// File is the embedded control plane. The lab keeps every object it was
// given in objects/ (one manifest per object; the control plane's allocations in
// objects/.svcnet-state.json), and publishes the whole cluster as one file,
// ControlPlane/cluster.yaml, that every node's proxy watches (--state).
//
// Publishing in one atomic file means a proxy never sees half an apply; and since
// the published Services carry the ClusterIPs and node ports the lab allocated, as
// requests, every proxy's own control plane arrives at the same allocations
// whatever it saw before.
type File struct {
	names topology.Names
	cfg   controlplane.Config
	// published is the load this process last published, and the
	// identities of objects/ and cluster.yaml then: while neither changed
	// (every write to objects/ renames a file into it, every publish
	// renames cluster.yaml), Result reads it instead of loading again.
	published *publication
	// sock is where the lab's control-plane daemon listens, for a File
	// that sends its changes there (see ControlPlaneSocket); empty: this
	// File makes them itself.
	sock string
	// cache keeps what one load decoded and reconciled for the next: the
	// daemon's, which loads again on every change; nil for a File that
	// loads once or twice in a short-lived command.
	cache *file.Cache
	// encoded is, when cache is set, each object of the last publication
	// with its encoding there: a load through the cache gives an unchanged
	// object again as the same pointer, and objects are never modified
	// once loaded, so a publication encodes only what changed.
	encoded map[runtime.Object][]byte
	// pub writes the publication and its journal; it remembers the last
	// publication when cache is set.
	pub *file.Publisher
	// took is how long the last publication's load and publishing took,
	// as key and value pairs for a log line.
	took []any
}

type publication struct {
	l           *file.Loaded
	objects, at fileID
}

// fileID tells a file's (or directory's) versions apart: an atomic
// rename gives a new inode, a rename into a directory a new mtime.
type fileID struct {
	ino   uint64
	mtime time.Time
	size  int64
}

func idOf(path string) (fileID, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{ino: st.Ino, mtime: fi.ModTime(), size: fi.Size()}, true
}

// current returns the published load when objects/ and cluster.yaml are
// still as they were when it was published.
func (c *File) current() *file.Loaded {
	p := c.published
	if p == nil {
		return nil
	}
	objects, ok1 := idOf(c.objectsDir())
	at, ok2 := idOf(c.PublishPath())
	if !ok1 || !ok2 || objects != p.objects || at != p.at {
		return nil
	}
	return p.l
}

// NewFile is the embedded control plane of lab n, whose IP families are s:
// its Service CIDRs are s's, the primary family's first.
func NewFile(n topology.Names, s topology.Stack) *File {
	return &File{names: n, cfg: controlplane.Config{
		ServiceCIDRs:  s.ServiceRanges(),
		NodePortRange: controlplane.PortRange{First: 30000, Last: 32767},
	}}
}

func (c *File) objectsDir() string  { return c.names.Path("objects") }
func (c *File) PublishPath() string { return c.names.Path("cluster", "cluster.yaml") }

// ProxyArgs name the published cluster and the lab's Service CIDRs, so that
// every reader's own control plane validates and allocates as the lab's does.
func (c *File) ProxyArgs() []string {
	return []string{"--state", c.PublishPath(), "--service-cluster-ip-range", topology.Join(c.cfg.ServiceCIDRs)}
}

// objectPath is where one object is kept: objects/KIND.NAMESPACE.NAME.yaml
// (KIND.NAME.yaml when cluster-scoped), shortened and hashed where that is too
// long for a file name (see nameKey). The name and namespace are checked by the
// apiserver's rules for the kind first: a name that could not be created is
// refused before it comes near a path.
func (c *File) objectPath(kind, namespace, name string) (string, error) {
	if err := controlplane.ValidateName(kind, namespace, name); err != nil {
		return "", err
	}
	parts := []string{kind, name}
	if namespace != "" {
		parts = []string{kind, namespace, name}
	}
	return filepath.Join(c.objectsDir(), topology.NameKey(topology.MaxObjectKey, parts...)+".yaml"), nil
}

func (c *File) pathOf(obj runtime.Object) (string, error) {
	m, err := MetaOf(obj)
	if err != nil {
		return "", err
	}
	return c.objectPath(KindOf(obj), m.GetNamespace(), m.GetName())
}

func (c *File) registerNodes(nodes []*corev1.Node) error {
	for _, n := range nodes {
		if err := c.write(n); err != nil {
			return err
		}
	}
	return c.publish()
}

func (c *File) apply(objs []controlplane.Object) []error {
	type undo struct {
		path   string
		origin string // where the user's object came from
		old    []byte // nil: the object did not exist
	}
	var undos []undo
	var errs []error
	for _, o := range objs {
		p, err := c.pathOf(o.Obj)
		if err != nil {
			errs = append(errs, WithOrigin(err, o.Origin))
			continue
		}
		old, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s: %w", o.Origin, err))
			continue
		}
		if err := c.write(o.Obj); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.Origin, err))
			continue
		}
		undos = append(undos, undo{p, o.Origin, old})
	}
	// What the control plane rejects is taken back, as the apiserver would refuse
	// it, and reported as coming from the user's file, not from objects/.
	l, err := c.load(false)
	if err != nil {
		return append(errs, err)
	}
	rejected := 0
	for _, e := range l.Errors {
		for _, u := range undos {
			if !fromFile(originOf(e), u.path) {
				continue
			}
			errs = append(errs, WithOrigin(e, u.origin))
			rejected++
			if u.old == nil {
				_ = os.Remove(u.path)
			} else {
				_ = writeFileAtomic(u.path, u.old)
			}
		}
	}
	if rejected > 0 { // what was loaded still holds the rejected objects
		if l, err = c.load(false); err != nil {
			return append(errs, err)
		}
	}
	if err := c.publishLoaded(l); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func originOf(err error) string {
	var oe *controlplane.ObjectError
	if errors.As(err, &oe) {
		return oe.Origin
	}
	var de *file.DocError
	if errors.As(err, &de) {
		return de.Origin
	}
	return ""
}

// fromFile reports whether origin ("FILE" or "FILE#DOC") names the file path.
func fromFile(origin, path string) bool {
	rest, ok := strings.CutPrefix(origin, path)
	return ok && (rest == "" || strings.HasPrefix(rest, "#"))
}

// WithOrigin returns err as coming from origin, the user's file (and
// document): an ObjectError or DocError gets origin in place of its own (a
// file under objects/, which the user never wrote); any other error is
// prefixed with it.
func WithOrigin(err error, origin string) error {
	var oe *controlplane.ObjectError
	if errors.As(err, &oe) {
		c := *oe
		c.Origin = origin
		return &c
	}
	var de *file.DocError
	if errors.As(err, &de) {
		c := *de
		c.Origin = origin
		return &c
	}
	return fmt.Errorf("%s: %w", origin, err)
}

func (c *File) delete(kind, namespace, name string) error {
	p, err := c.objectPath(kind, namespace, name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s %s: not found", kind, qualified(namespace, name))
		}
		return err
	}
	return c.publish()
}

func (c *File) Pod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	path, err := c.objectPath("Pod", namespace, name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return &p, nil
}

func (c *File) createPod(pod *corev1.Pod) error {
	// Not published until it has a status: an unstarted Pod has no endpoint anyway.
	return c.write(pod)
}

// SetPodStatus writes the Pod and publishes the cluster. It fails when the
// control plane refuses the Pod (for what depends on other objects, which
// Validate cannot see), so that the caller can undo what it made for it
// instead of running a pod no proxy and no `lab get` knows.
func (c *File) setPodStatus(pod *corev1.Pod) error {
	path, err := c.pathOf(pod)
	if err != nil {
		return err
	}
	if err := c.write(pod); err != nil {
		return err
	}
	l, err := c.load(false)
	if err != nil {
		return err
	}
	var refused error
	for _, e := range l.Errors {
		if fromFile(originOf(e), path) {
			refused = e
		}
	}
	return errors.Join(refused, c.publishLoaded(l))
}

func (c *File) terminatePod(ctx context.Context, namespace, name string, grace int64) error {
	p, err := c.Pod(ctx, namespace, name)
	if err != nil || p == nil {
		return err
	}
	now := metav1.NewTime(time.Now())
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	return c.setPodStatus(p)
}

func (c *File) removePod(namespace, name string) error {
	p, err := c.objectPath("Pod", namespace, name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return c.publish()
}

// Result is what the embedded control plane holds, with the events
// recorded so far (not this load's). A File that holds its last load
// gives it whole; one that loads reads only kinds (see file.KindsFor).
func (c *File) Result(_ context.Context, kinds ...string) (*controlplane.Result, error) {
	l := c.current()
	if l == nil {
		var err error
		if l, err = c.loadResult(kinds); err != nil {
			return nil, err
		}
	}
	r := l.API
	var err error
	if r.Events, err = c.Events(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Reader reads what the embedded control plane holds, for describe.
func (c *File) Reader(ctx context.Context) (describe.Reader, error) {
	r, err := c.Result(ctx)
	if err != nil {
		return nil, err
	}
	return describe.Held{R: r, Recorded: r.Events}, nil
}

// load loads objects/ through the File's cache, persisting the
// allocations unless readOnly.
func (c *File) load(readOnly bool) (*file.Loaded, error) {
	return c.loadWith(file.Options{ReadOnly: readOnly, Cache: c.cache})
}

// loadResult loads objects/ for the control plane's result alone (the API
// objects, as a reader shows them): nothing is persisted, and the decoded
// manifests are let go once reconciled. Without a cache it reads only
// kinds and what they depend on (none: every kind).
func (c *File) loadResult(kinds []string) (*file.Loaded, error) {
	opts := file.Options{ReadOnly: true, ResultOnly: true, Cache: c.cache}
	if c.cache == nil {
		opts.Kinds = file.KindsFor(kinds...)
	}
	return c.loadWith(opts)
}

func (c *File) loadWith(opts file.Options) (*file.Loaded, error) {
	if err := os.MkdirAll(c.objectsDir(), 0o755); err != nil {
		return nil, err
	}
	opts.Path, opts.Config = c.objectsDir(), c.cfg
	return file.Load(opts)
}

// publish writes cluster/cluster.yaml: every object as given, with the Services
// as the control plane allocated them.
func (c *File) publish() error {
	l, err := c.load(false)
	if err != nil {
		return err
	}
	return c.publishLoaded(l)
}

// publishLoaded publishes l, a load of objects/ as it is now, and records
// its events.
func (c *File) publishLoaded(l *file.Loaded) (err error) {
	c.published = nil
	publishing := time.Now()
	defer func() {
		c.took = append(l.Timings(), "publish", time.Since(publishing))
		objects, ok1 := idOf(c.objectsDir())
		at, ok2 := idOf(c.PublishPath())
		if err == nil && ok1 && ok2 {
			c.published = &publication{l: l, objects: objects, at: at}
		}
	}()
	if err := c.record(l.API.Events, time.Now()); err != nil {
		return fmt.Errorf("recording events: %w", err)
	}
	resolved := map[string]*corev1.Service{}
	for _, s := range l.API.Services {
		resolved[s.Namespace+"/"+s.Name] = s
	}
	docs := make([]runtime.Object, 0, len(l.Objects))
	for _, o := range l.Objects {
		obj := o.Obj
		if s, ok := obj.(*corev1.Service); ok {
			if r := resolved[s.Namespace+"/"+s.Name]; r != nil {
				obj = r
			}
		}
		docs = append(docs, obj)
	}
	var encoded map[runtime.Object][]byte
	if c.cache != nil {
		encoded = make(map[runtime.Object][]byte, len(l.Objects))
	}
	enc := func(obj runtime.Object) ([]byte, error) {
		if b, ok := encoded[obj]; ok {
			return b, nil
		}
		b, ok := c.encoded[obj]
		if !ok {
			var err error
			if b, err = file.EncodeJSON(obj); err != nil {
				return nil, err
			}
		}
		if encoded != nil {
			encoded[obj] = b
		}
		return b, nil
	}
	if c.pub == nil {
		c.pub = file.NewPublisher(c.PublishPath(), c.cache != nil)
	}
	if err := c.pub.Publish(docs, l.API, enc); err != nil {
		c.encoded = nil
		return err
	}
	c.encoded = encoded
	return nil
}

func (c *File) write(obj runtime.Object) error {
	p, err := c.pathOf(obj)
	if err != nil {
		return err
	}
	b, err := marshal(obj)
	if err != nil {
		return err
	}
	return writeFileAtomic(p, b)
}

// marshal writes obj as YAML with its apiVersion and kind.
func marshal(obj runtime.Object) ([]byte, error) {
	obj, err := file.WithKind(obj)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(obj)
}

func MetaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok || m.GetName() == "" {
		return nil, fmt.Errorf("%s without metadata.name", KindOf(obj))
	}
	return m, nil
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Config is the configuration of the embedded control plane: the lab's
// Service range and node port range.
func (c *File) Config() controlplane.Config { return c.cfg }

package file

import (
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// Cache keeps what earlier loads decoded, so that a reload decodes only what
// changed: per file, its identity (inode, size, mtime, ctime) and what it
// decoded to; per document, by its file, place and exact content, what it
// decoded to. A file whose identity is unchanged is not read again; a file
// that changed is read, and only its changed documents are decoded. Decoding
// is most of a load's cost (10,000 Services with one EndpointSlice each, one
// manifest per object: about 1 s of a 1.3 s load), and one edit changes one
// document.
//
// A load through a Cache also reconciles through the Cache's
// controlplane.Reconciler, which does not validate again an object it was
// given by the last load.
//
// The objects a Cache returns are shared between loads: they must not be
// modified (Reconcile does not). A Cache keeps only what the last load used.
// It is not safe for concurrent use.
type Cache struct {
	files map[string]cachedFile
	docs  map[docKey]decoded
	// next collects what the running load uses; it replaces docs at the end.
	next  map[docKey]decoded
	nextF map[string]cachedFile
	// reconciler remembers the validation of the objects the cache gives.
	reconciler controlplane.Reconciler
}

// NewCache returns an empty Cache.
func NewCache() *Cache {
	return &Cache{files: map[string]cachedFile{}, docs: map[docKey]decoded{}}
}

type docKey struct{ origin, content string }

type decoded struct {
	objs []controlplane.Object
	errs []error
}

type cachedFile struct {
	id fileStat
	decoded
	// docs are its documents' keys, kept with it while it is unchanged.
	docs []docKey
}

// fileStat tells versions of a file apart: a rename gives a new inode, a
// write in place a new mtime and ctime (nanoseconds) or size.
type fileStat struct {
	ino          uint64
	size         int64
	mtime, ctime time.Time
}

func statFile(path string) (fileStat, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStat{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{
		ino: st.Ino, size: fi.Size(), mtime: fi.ModTime(),
		ctime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
	}, true
}

// Forget drops what the cache knows of the file at path, so that the next
// load reads it whatever its identity: for a change a watcher reported
// within the file system's timestamp granularity.
func (c *Cache) Forget(path string) {
	if c != nil {
		delete(c.files, filepath.Clean(path))
	}
}

// begin starts a load.
func (c *Cache) begin() {
	c.next = make(map[docKey]decoded, len(c.docs))
	c.nextF = make(map[string]cachedFile, len(c.files))
}

// end finishes a load that succeeded: what it did not use is dropped.
func (c *Cache) end() {
	c.docs, c.files = c.next, c.nextF
	c.next, c.nextF = nil, nil
}

// abort finishes a load that failed: the cache stays as it was before it.
func (c *Cache) abort() { c.next, c.nextF = nil, nil }

// file returns what the file at path decoded to when it has not changed
// since, and its identity now (ok false when it cannot be had).
func (c *Cache) file(path string) (d decoded, id fileStat, hit, ok bool) {
	id, ok = statFile(path)
	if !ok {
		return decoded{}, id, false, false
	}
	f, hit := c.files[filepath.Clean(path)]
	if hit && f.id == id {
		c.keepFile(filepath.Clean(path), f)
		return f.decoded, id, true, true
	}
	return decoded{}, id, false, true
}

func (c *Cache) keepFile(path string, f cachedFile) {
	c.nextF[path] = f
	for _, k := range f.docs {
		if d, ok := c.docs[k]; ok {
			c.next[k] = d
		}
	}
}

// readFile returns what the file at path decodes to, reading and decoding
// only what changed since the last load.
func (c *Cache) readFile(path string) (decoded, error) {
	d, id, hit, ok := c.file(path)
	if hit {
		return d, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return decoded{}, err
	}
	var keys []docKey
	d = decodeFile(path, data, func(origin string, doc []byte) decoded {
		k := docKey{origin, string(doc)}
		keys = append(keys, k)
		dd, found := c.docs[k]
		if !found {
			if dd, found = c.next[k]; !found {
				dd = decodeDocument(origin, doc)
			}
		}
		c.next[k] = dd
		return dd
	})
	if ok {
		// The identity was taken before the read: a write after it gives
		// the next load another identity, never a stale hit.
		c.nextF[filepath.Clean(path)] = cachedFile{id: id, decoded: d, docs: keys}
	}
	return d, nil
}

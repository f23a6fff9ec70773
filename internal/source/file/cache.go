package file

import (
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// Cache keeps what earlier loads decoded, so that a reload decodes only what
// changed: per file, its identity (inode, size, mtime, ctime) and what it
// decoded to; per document, by its exact content, what it decoded to,
// wherever it is (a document moved by an insertion before it, in its file
// or another, gives the same objects under its new origin). A file whose identity is unchanged is not read again; a file
// that changed is read, and only its changed documents are decoded. Decoding
// is most of a load's cost (10,000 Services with one EndpointSlice each, one
// manifest per object: about 1 s of a 1.3 s load), and one edit changes one
// document.
//
// A load through a Cache also reconciles through the Cache's
// controlplane.Reconciler, which does not validate again an object it was
// given by the last load, and gives the same object for what did not
// change; the Cache converts again to the model only what did.
//
// The objects a Cache returns are shared between loads: they must not be
// modified (Reconcile does not). A Cache keeps only what the last load used.
// It is not safe for concurrent use.
type Cache struct {
	files map[string]cachedFile
	// docs maps a document's content to what it decoded to.
	docs map[string]decodedDoc
	// next collects what the running load uses; it replaces docs at the end.
	next  map[string]decodedDoc
	nextF map[string]cachedFile
	// reconciler remembers the validation of the objects the cache gives.
	reconciler controlplane.Reconciler
	// models is the last load's conversion of the reconciler's objects.
	models modelMemo
	// disk is what other processes decoded (see diskCache), read by the
	// first load only: later ones have it all in memory.
	disk *diskCache
	// loaded is whether a load through the cache succeeded: the first one
	// reads the disk cache, the later ones (even of an empty directory)
	// never again.
	loaded bool
	// fresh counts the documents decoded from their text since the disk
	// cache was read or written: when they are a tenth of the documents
	// or more, a load writes it again (refreshDisk), so that the one-shot
	// readers of the same manifests (svcnet get, lab get) find them there.
	fresh int
	// state is the state file as the last load read or wrote it.
	state *stateMemo
	// enc writes the state file, encoding only the entries that changed.
	enc stateEncoder
	// only is the kinds a one-shot load reads (Options.Kinds); nil for
	// every kind.
	only kindFilter
	// pre holds the documents of the running load decoded ahead of its
	// sequential pass (prefetch).
	pre prefetched
	// spareDocs and spareFiles are the maps of the load before the last,
	// emptied and reused as next and nextF; spareBuf is the largest file
	// buffer of the last load, reused to read a file (see recycle). A
	// reload of one 9 MB manifest of 20,000 documents otherwise allocates
	// 13 MB for them, a third of what it allocates, and the garbage
	// collections they bring are the slow reloads.
	spareDocs  map[string]decodedDoc
	spareFiles map[string]cachedFile
	spareBuf   []byte
}

// NewCache returns an empty Cache.
func NewCache() *Cache {
	return &Cache{files: map[string]cachedFile{}, docs: map[string]decodedDoc{}}
}

type decoded struct {
	objs []controlplane.Object
	errs []error
}

// decodedDoc is one document decoded: its content (the key it is kept
// under), where it was, and what it gave.
type decodedDoc struct {
	content, origin string
	decoded
}

// at returns what the document gives at origin: its objects, under origin
// (the same objects: a Reconciler knows them), when it decoded to objects
// alone, each named by the document's origin; ok false when it must be
// decoded again to be told at origin (errors and List items name their
// place in their text).
func (d decodedDoc) at(origin string) (decoded, bool) {
	if origin == d.origin {
		return d.decoded, true
	}
	if len(d.errs) > 0 {
		return decoded{}, false
	}
	objs := make([]controlplane.Object, len(d.objs))
	for i, o := range d.objs {
		if o.Origin != d.origin {
			return decoded{}, false
		}
		objs[i] = controlplane.Object{Origin: origin, Obj: o.Obj}
	}
	return decoded{objs: objs}, true
}

type cachedFile struct {
	id fileStat
	decoded
	// docs are its documents as the cache holds them, in order: kept
	// with it while it is unchanged, and matched by position against its
	// next version (see align).
	docs []decodedDoc
}

// fileStat tells versions of a file apart: a rename gives a new inode, a
// write in place a new mtime and ctime (nanoseconds) or size.
type fileStat struct {
	ino          uint64
	size         int64
	mtime, ctime time.Time
}

func statFile(path string) (fileStat, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileStat{}, false
	}
	return identity(&st), true
}

func identity(st *syscall.Stat_t) fileStat {
	return fileStat{
		ino: st.Ino, size: st.Size,
		mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		ctime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
	}
}

// readInto reads fd, the file at path opened by openRegular with status
// st, and tells its identity, into buf's memory when the file fits; a
// buffer it makes has a sixteenth more room than the file needs. It uses
// the system calls directly: os.ReadFile costs twice as many for a regular
// file (it tries the network poller first), which is the larger part of
// reading 20,000 small manifests.
func readInto(path string, fd int, st *syscall.Stat_t, buf []byte) ([]byte, fileStat, error) {
	if int64(cap(buf)) < st.Size+1 {
		// Room to grow: a manifest that gains a document still fits
		// when the buffer is read into again.
		buf = make([]byte, 0, st.Size+st.Size/16+1)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, fileStat{}, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, identity(st), nil
		}
		buf = buf[:len(buf)+n]
	}
}

// openRegular opens the regular file at path for reading and returns its
// descriptor, which the caller closes, and its status.
func openRegular(path string) (int, syscall.Stat_t, error) {
	var st syscall.Stat_t
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return -1, st, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return -1, st, &os.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	}
	return fd, st, nil
}

// Forget makes the next load read the file at path whatever its identity:
// for a change a watcher reported within the file system's timestamp
// granularity. What its documents decoded to is still matched against what
// the load reads.
func (c *Cache) Forget(path string) {
	if c == nil {
		return
	}
	path = filepath.Clean(path)
	if f, ok := c.files[path]; ok {
		f.id = fileStat{} // no file has inode 0
		c.files[path] = f
	}
}

// keeps reports whether the cache keeps what a load decoded for the next
// one; the zero Cache serves one load and keeps nothing.
func (c *Cache) keeps() bool { return c.files != nil }

// begin starts a load.
func (c *Cache) begin() {
	if !c.keeps() {
		return
	}
	c.next, c.nextF = c.spareDocs, c.spareFiles
	c.spareDocs, c.spareFiles = nil, nil
	if c.next == nil {
		c.next = make(map[string]decodedDoc, len(c.docs))
	}
	if c.nextF == nil {
		c.nextF = make(map[string]cachedFile, len(c.files))
	}
}

// end finishes a load that succeeded: what it did not use is dropped.
func (c *Cache) end() {
	if !c.keeps() {
		return
	}
	old, oldF := c.docs, c.files
	c.docs, c.files = c.next, c.nextF
	c.next, c.nextF = nil, nil
	clear(old)
	clear(oldF)
	c.spareDocs, c.spareFiles = old, oldF
}

// abort finishes a load that failed: the cache stays as it was before it.
func (c *Cache) abort() {
	if !c.keeps() {
		return
	}
	clear(c.next)
	clear(c.nextF)
	c.spareDocs, c.spareFiles = c.next, c.nextF
	c.next, c.nextF = nil, nil
}

// recycle keeps the largest of a finished load's file buffers for the next
// load to read into. Nothing a load returns or keeps refers to a file's
// buffer: a document kept is a copy (decodedDoc.content), decoded objects
// own their strings, the disk cache keeps hashes, and prefetch's documents
// are dropped with the load (readFiles).
func (c *Cache) recycle(reads []fileRead) {
	if !c.keeps() {
		return
	}
	for _, r := range reads {
		if cap(r.data) > cap(c.spareBuf) {
			c.spareBuf = r.data
		}
	}
}

// file returns what the file at path decoded to when the cache knows it
// and it has not changed since.
func (c *Cache) file(path string) (decoded, bool) {
	path = filepath.Clean(path)
	f, known := c.files[path]
	if !known {
		return decoded{}, false
	}
	if id, ok := statFile(path); !ok || id != f.id {
		return decoded{}, false
	}
	c.keepFile(path, f)
	return f.decoded, true
}

func (c *Cache) keepFile(path string, f cachedFile) {
	c.nextF[path] = f
	for _, d := range f.docs {
		c.keepDoc(d, d.origin)
	}
}

// keepDoc keeps d for the next load, as seen at origin: the entry of its
// content is the one of the load that saw it at its own origin, if any.
func (c *Cache) keepDoc(d decodedDoc, origin string) {
	if _, kept := c.next[d.content]; !kept || d.origin == origin {
		c.next[d.content] = d
	}
}

// lookup returns what the cache holds of the document at origin and what
// it gives there; ok is false when it must be decoded.
func (c *Cache) lookup(origin string, doc []byte) (d decodedDoc, out decoded, ok bool) {
	d, found := c.next[string(doc)]
	if !found {
		d, found = c.docs[string(doc)]
	}
	if !found {
		return decodedDoc{}, decoded{}, false
	}
	out, ok = d.at(origin)
	return d, out, ok
}

// doc returns what the document at origin decodes to, and the entry it is
// kept under, decoding it only when no load (this one included) decoded
// its content yet. old, when not nil, is what the same document (the same
// content) decoded to in the file's previous version.
func (c *Cache) doc(origin string, doc []byte, old *decodedDoc) (decoded, decodedDoc) {
	if old != nil {
		if out, ok := old.at(origin); ok {
			c.keepDoc(*old, origin)
			return out, *old
		}
	}
	if d, out, ok := c.lookup(origin, doc); ok {
		c.keepDoc(d, origin)
		return out, d
	}
	d := decodedDoc{content: string(doc), origin: origin, decoded: c.decodeDocument(origin, doc)}
	c.next[d.content] = d
	return d.decoded, d
}

// decodeDocument decodes the document at origin: as decoded ahead of this
// pass (prefetch), from the disk cache, or from its text.
func (c *Cache) decodeDocument(origin string, doc []byte) decoded {
	if c.only.skips(doc) {
		if c.disk != nil {
			c.disk.keepSkipped(doc)
		}
		return decoded{}
	}
	if r, ok := c.pre.take(origin, doc); ok {
		if c.disk != nil {
			c.disk.record(r)
		} else {
			c.fresh++
		}
		return r.d
	}
	if c.disk != nil {
		r := c.disk.lookup(origin, doc)
		c.disk.record(r)
		return r.d
	}
	c.fresh++
	return decodeDocument(origin, doc)
}

// refreshDisk returns the decode cache at path to write after a load that
// is not the first, holding the documents the Cache keeps now, when the
// ones decoded from their text since it was last read or written are a
// tenth of them or more (the threshold of diskCache.worthWriting); nil
// otherwise. A long-lived reader (the lab's control-plane daemon, a proxy)
// reads the disk cache on its first load only, and the manifests it is
// given later are decoded in memory alone: without this, the cache a new
// process reads holds only what the first load saw. The documents are
// hashed and encoded by write, off a serving load's path.
func (c *Cache) refreshDisk(path string) *diskCache {
	if c.fresh == 0 || c.fresh*10 < len(c.docs) {
		return nil
	}
	c.fresh = 0
	d := &diskCache{path: path, used: map[[sha256.Size]byte][]byte{}, decoded: map[[sha256.Size]byte]runtime.Object{}, keep: true}
	for _, doc := range c.docs {
		if len(doc.errs) == 0 && len(doc.objs) == 1 && doc.objs[0].Origin == doc.origin {
			d.pending = append(d.pending, doc)
		}
	}
	return d
}

// fileRead is one file of a load after its first pass: what the cache
// knew of it (hit), or its content split into documents.
type fileRead struct {
	path string
	hit  bool
	// d is what the file decoded to, on a hit.
	d decoded
	// data and id are the file's content and identity as read; docs its
	// documents, named by origins (splitErr when it does not parse).
	data     []byte
	id       fileStat
	origins  []string
	docs     [][]byte
	splitErr error
	// same holds, per document, the file's previous version of it (the
	// same content, matched by position), nil where there is none.
	same []*decodedDoc
	// done marks, in a streamed file (Cache.stream), the documents
	// already decoded, to ready[i], or skipped; nil in a file read whole.
	done  []bool
	ready []decoded
}

// read is a load's first pass over the file at path: nothing when the
// cache knows it unchanged, else its content and documents.
func (c *Cache) read(path string) (fileRead, error) {
	if c.keeps() {
		if d, hit := c.file(path); hit {
			return fileRead{path: path, hit: true, d: d}, nil
		}
	}
	fd, st, err := openRegular(path)
	if err != nil {
		return fileRead{}, err
	}
	defer syscall.Close(fd)
	if c.streams() && st.Size > streamMin {
		r, ok, err := c.stream(path, fd)
		if ok || err != nil {
			return r, err
		}
		if _, err := syscall.Seek(fd, 0, io.SeekStart); err != nil {
			return fileRead{}, &os.PathError{Op: "seek", Path: path, Err: err}
		}
	}
	buf := c.spareBuf
	c.spareBuf = nil
	data, id, err := readInto(path, fd, &st, buf)
	if err != nil {
		c.spareBuf = buf
		return fileRead{}, err
	}
	r := fileRead{path: path, data: data, id: id}
	docs, splitErr := splitDocuments(data)
	if c.streams() && splitErr == nil {
		r.data = nil
		for _, doc := range docs {
			c.keepDocument(&r, doc)
		}
		if cap(data) <= streamMin {
			c.spareBuf = data
		}
		return r, nil
	}
	r.docs, r.splitErr = docs, splitErr
	for i := range r.docs {
		r.origins = append(r.origins, docOrigin(path, i))
	}
	if c.keeps() {
		if f, ok := c.files[filepath.Clean(path)]; ok {
			r.same = align(f.docs, r.docs)
		}
	}
	return r, nil
}

// align matches the documents of a file's new version with those of its
// previous one, in order: each new document is the next previous one, or
// the one after it (one was removed), or is new (inserted or edited). A
// document matched this way is known without looking its content up:
// after an edit, an insertion or a removal, every other document of the
// file is matched (a memory comparison, where a lookup by content costs a
// hash and a probe of a map of every document: about 18 ms of a reload of
// 20,000 documents). What is not matched is looked up by content.
func align(prev []decodedDoc, docs [][]byte) []*decodedDoc {
	same := make([]*decodedDoc, len(docs))
	j := 0
	for i, doc := range docs {
		switch {
		case j < len(prev) && prev[j].content == string(doc):
			same[i] = &prev[j]
			j++
		case j+1 < len(prev) && prev[j+1].content == string(doc):
			same[i] = &prev[j+1]
			j += 2
		}
	}
	return same
}

// decodeRead is a load's second pass over a file: what it decodes to,
// decoding only the documents no load (this one included) decoded yet.
func (c *Cache) decodeRead(r fileRead) decoded {
	if r.hit {
		return r.d
	}
	if r.done != nil {
		i := -1 // decodeDocs goes through the documents in order
		return decodeDocs(r, func(origin string, doc []byte) decoded {
			i++
			if r.done[i] {
				return r.ready[i]
			}
			return c.decodeDocument(origin, doc)
		})
	}
	if !c.keeps() {
		return decodeDocs(r, c.decodeDocument)
	}
	entries := make([]decodedDoc, 0, len(r.docs))
	d := decodeDocs(r, func(origin string, doc []byte) decoded {
		var old *decodedDoc
		if i := len(entries); i < len(r.same) {
			old = r.same[i]
		}
		out, entry := c.doc(origin, doc, old)
		entries = append(entries, entry)
		return out
	})
	// The identity is the read file's own: a write after the read gives
	// the next load another one, never a stale hit.
	c.nextF[filepath.Clean(r.path)] = cachedFile{id: r.id, decoded: d, docs: entries}
	return d
}

// known reports whether document i of r is answered from memory, without
// decoding: the file's previous version had it, or an earlier load decoded
// its content, and it can be told at its origin.
func (c *Cache) known(r fileRead, i int) bool {
	if !c.keeps() {
		return false
	}
	if i < len(r.same) && r.same[i] != nil {
		if _, ok := r.same[i].at(r.origins[i]); ok {
			return true
		}
	}
	_, _, ok := c.lookup(r.origins[i], r.docs[i])
	return ok
}

package file

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/controlplane"
)

// DecodedPathFor returns where a load keeps what it decoded from the
// manifests at path, for the next process that loads them: beside the
// state file, DIR/.svcnet-decoded for a directory and
// DIR/.NAME.svcnet-decoded for a file (dotfiles are never manifests).
func DecodedPathFor(path string) string {
	if isDir(path) {
		return filepath.Join(path, ".svcnet-decoded")
	}
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".svcnet-decoded")
}

// diskCache is what earlier processes decoded, by document content
// (SHA-256), as the API objects' protobuf encoding: decoding the protobuf
// of 10,000 Services and their EndpointSlices takes about 25 ms where
// their YAML takes about 900 ms (BenchmarkLoad10k, BenchmarkColdLoad10k).
// Only a document that decoded to one object of a kind with a protobuf
// encoding, and whose encoding decodes to an object deeply equal to it,
// is kept: a hit gives exactly what decoding the document would.
//
// The file starts with a header naming this format and the k8s.io/api
// version; a file with another header, or that does not parse, is an empty
// cache. Writes are atomic (rename); several processes may share one file,
// the last writer's content wins, and every content is right.
type diskCache struct {
	path string
	// have is what the file held; used, what this load read from it.
	have, used map[[sha256.Size]byte][]byte
	// decoded are the objects of the documents this load decoded that
	// write may keep (one object each), encoded only by write: off the
	// path of a load that serves first and writes after.
	decoded map[[sha256.Size]byte]runtime.Object
	// pending are documents a long-lived Cache holds (refreshDisk), each
	// of one object of its own origin, that write keys and keeps.
	pending []decodedDoc
	// keep is whether this load may write the file.
	keep bool
}

var protoCodec = protobuf.NewSerializer(Scheme, Scheme)

// diskCacheHeader names the format; it changes when decoding could give
// another object for the same document.
var diskCacheHeader = func() string {
	api := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/api" {
				api = d.Version
			}
		}
	}
	return "svcnet decoded documents v1; k8s.io/api " + api + "\n"
}()

// openDiskCache reads the cache at path; a missing or unreadable one is
// empty.
func openDiskCache(path string) *diskCache {
	c := &diskCache{path: path, have: map[[sha256.Size]byte][]byte{}, used: map[[sha256.Size]byte][]byte{},
		decoded: map[[sha256.Size]byte]runtime.Object{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return c
	}
	rest, ok := bytes.CutPrefix(b, []byte(diskCacheHeader))
	if !ok {
		return c
	}
	for len(rest) > 0 {
		if len(rest) < sha256.Size {
			return c
		}
		var k [sha256.Size]byte
		copy(k[:], rest)
		rest = rest[sha256.Size:]
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			clear(c.have)
			return c
		}
		c.have[k] = rest[w : w+int(n)]
		rest = rest[w+int(n):]
	}
	return c
}

// diskLookup is what a lookup found for one document: what it decodes to,
// and what record must note of it.
type diskLookup struct {
	d   decoded
	key [sha256.Size]byte
	// hit is the cached encoding the document decoded from; nil when it
	// was decoded from its text.
	hit []byte
	// keepable: decoded from its text to one object of its own origin.
	keepable bool
}

// lookup returns what doc decodes to: from the cache when it holds doc,
// else by decodeDocument. It only reads the cache, so that documents may
// be looked up concurrently; record, called for each in turn, keeps what
// the file is to hold.
func (c *diskCache) lookup(origin string, doc []byte) diskLookup {
	k := sha256.Sum256(doc)
	if r, ok := c.cached(origin, k); ok {
		return r
	}
	d := decodeDocument(origin, doc)
	return diskLookup{d: d, key: k, keepable: len(d.errs) == 0 && len(d.objs) == 1 && d.objs[0].Origin == origin}
}

// lookupCached is lookup from the cache alone: ok is false when the cache
// does not hold doc, or holds an encoding that does not decode.
func (c *diskCache) lookupCached(origin string, doc []byte) (diskLookup, bool) {
	return c.cached(origin, sha256.Sum256(doc))
}

// cached is what the cache gives for the document whose content hashes to
// k, at origin.
func (c *diskCache) cached(origin string, k [sha256.Size]byte) (diskLookup, bool) {
	if p, ok := c.have[k]; ok {
		if obj, err := decodeProto(p); err == nil {
			return diskLookup{d: decoded{objs: []controlplane.Object{{Origin: origin, Obj: obj}}}, key: k, hit: p}, true
		}
	}
	return diskLookup{}, false
}

// record notes a lookup: its cached encoding as used, or the object it
// decoded to as one to keep, when it decoded to one object of its origin.
func (c *diskCache) record(r diskLookup) {
	switch {
	case r.hit != nil:
		c.used[r.key] = r.hit
	case c.keep && r.keepable:
		c.decoded[r.key] = r.d.objs[0].Obj
	}
}

// keepSkipped keeps what the file holds of doc, which a load of some
// kinds skipped, for the readers of every kind.
func (c *diskCache) keepSkipped(doc []byte) {
	k := sha256.Sum256(doc)
	if p, ok := c.have[k]; ok {
		c.used[k] = p
	}
}

func decodeProto(p []byte) (runtime.Object, error) {
	obj, gvk, err := protoCodec.Decode(p, nil, nil)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	compact(obj)
	return obj, nil
}

// encodeExactly returns obj's protobuf encoding when decoding it gives an
// object deeply equal to obj (an empty list or map, for one, comes back
// nil).
func encodeExactly(obj runtime.Object) ([]byte, bool) {
	var buf bytes.Buffer
	if err := protoCodec.Encode(obj, &buf); err != nil {
		return nil, false
	}
	back, err := decodeProto(buf.Bytes())
	if err != nil || !reflect.DeepEqual(back, obj) {
		return nil, false
	}
	return buf.Bytes(), true
}

// worthWriting reports whether the file should be written again: it is
// missing what this load decoded (a tenth of the documents or more, or
// any when it was empty), or holds much this load did not use.
func (c *diskCache) worthWriting() bool {
	added := len(c.decoded)
	stale := len(c.have) - len(c.used)
	switch {
	case added > 0 && (len(c.have) == 0 || added*10 >= len(c.used)+added):
		return true
	case stale > 0 && stale*4 >= len(c.used)+added:
		return true
	}
	return false
}

// encode encodes the objects write is to keep, so that they may be
// modified afterwards (a load whose objects the control plane takes).
func (c *diskCache) encode() {
	for _, d := range c.pending {
		c.decoded[sha256.Sum256([]byte(d.content))] = d.objs[0].Obj
	}
	c.pending = nil
	for k, obj := range c.decoded {
		if p, ok := encodeExactly(obj); ok {
			c.used[k] = p
		}
	}
	c.decoded = nil
}

// write replaces the file with what this load used, in key order: what it
// read from the file, and the objects it decoded whose encoding decodes to
// them exactly.
func (c *diskCache) write() error {
	c.encode()
	keys := make([][sha256.Size]byte, 0, len(c.used))
	for k := range c.used {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [sha256.Size]byte) int { return bytes.Compare(a[:], b[:]) })
	err := atomicfile.WriteFunc(c.path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		bw.WriteString(diskCacheHeader)
		var n [binary.MaxVarintLen64]byte
		for _, k := range keys {
			p := c.used[k]
			bw.Write(k[:])
			bw.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
			bw.Write(p)
		}
		return bw.Flush()
	})
	if err != nil {
		return fmt.Errorf("writing decoded documents %s: %w", c.path, err)
	}
	return nil
}

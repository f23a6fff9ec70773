package file

import (
	"runtime"
	"sync"
)

// A load decodes the documents no earlier load decoded (all of them on a
// process's first load) on every CPU: its first pass reads and splits the
// files, prefetch decodes the documents memory cannot answer in parallel,
// and the sequential second pass takes them from Cache.pre in order, so
// that what a load returns is the same, object for object, as decoding one
// document after the other. On 2 CPUs a first load of 10,000 Services with
// one EndpointSlice each takes 1.0 s instead of 1.56 s from 20,000 YAML
// files (BenchmarkColdLoad10k), and 0.49 s instead of 0.61 s from one file
// of 20,000 JSON documents as the lab publishes them.

// prefetchMin is the fewest documents worth decoding in parallel: below it,
// starting goroutines costs more than it saves.
const prefetchMin = 64

// prefetched is what prefetch decoded: by origin, the position of the
// document's content (checked by the sequential pass; a slice of the file
// read, not a copy) and of what the disk cache's lookup gave. Positions
// rather than copies in a map: the map of 10,000 documents holds 0.3 MB
// instead of 1.7 MB while the load's objects are being decoded, when it
// holds the most.
type prefetched struct {
	at   map[string]int32
	docs [][]byte
	out  []diskLookup
}

// take returns what doc at origin was decoded to ahead, once; ok is false
// when it was not (or its content is not the one decoded).
func (p *prefetched) take(origin string, doc []byte) (diskLookup, bool) {
	i, ok := p.at[origin]
	if !ok || string(p.docs[i]) != string(doc) {
		return diskLookup{}, false
	}
	delete(p.at, origin)
	r := p.out[i]
	p.out[i] = diskLookup{}
	return r, true
}

// prefetch decodes, in parallel, the documents of reads that the cache
// cannot answer from memory, into c.pre.
func (c *Cache) prefetch(reads []fileRead) {
	var origins []string
	var docs [][]byte
	for _, r := range reads {
		if r.hit || r.splitErr != nil {
			continue
		}
		for i, doc := range r.docs {
			if r.done != nil && r.done[i] {
				continue
			}
			if !c.known(r, i) && !c.only.skips(doc) {
				origins = append(origins, r.origins[i])
				docs = append(docs, doc)
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(docs)/prefetchMin)
	if workers < 2 {
		return
	}
	out := make([]diskLookup, len(docs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(docs); i += workers {
				if c.disk != nil {
					out[i] = c.disk.lookup(origins[i], docs[i])
				} else {
					out[i] = diskLookup{d: decodeDocument(origins[i], docs[i])}
				}
			}
		})
	}
	wg.Wait()
	at := make(map[string]int32, len(origins))
	for i, o := range origins {
		at[o] = int32(i)
	}
	c.pre = prefetched{at: at, docs: docs, out: out}
}

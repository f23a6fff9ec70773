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

// predecoded is one document decoded ahead of a load's sequential pass:
// its content (checked there; a slice of the file read, not a copy), and
// what the disk cache's lookup gave.
type predecoded struct {
	doc  []byte
	disk diskLookup
}

// prefetch decodes, in parallel, the documents of reads that the cache
// cannot answer from memory, into c.pre by origin.
func (c *Cache) prefetch(reads []fileRead) {
	type job struct {
		origin string
		doc    []byte
	}
	var jobs []job
	for _, r := range reads {
		if r.hit || r.splitErr != nil {
			continue
		}
		for i, doc := range r.docs {
			if !c.known(r, i) && !c.only.skips(doc) {
				jobs = append(jobs, job{r.origins[i], doc})
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(jobs)/prefetchMin)
	if workers < 2 {
		return
	}
	out := make([]diskLookup, len(jobs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(jobs); i += workers {
				if c.disk != nil {
					out[i] = c.disk.lookup(jobs[i].origin, jobs[i].doc)
				} else {
					d := decodeDocument(jobs[i].origin, jobs[i].doc)
					out[i] = diskLookup{d: d}
				}
			}
		})
	}
	wg.Wait()
	c.pre = make(map[string]predecoded, len(jobs))
	for i, j := range jobs {
		c.pre[j.origin] = predecoded{doc: j.doc, disk: out[i]}
	}
}

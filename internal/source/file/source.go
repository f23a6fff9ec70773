package file

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/model"
)

// debounce is how long the source waits after a file is written in place for
// more events before reloading: editors write a file in several steps.
const debounce = 100 * time.Millisecond

// settle is how long it waits after a file is created, renamed into place or
// removed: such a file is whole (an atomic writer renames it in), and a
// writer replacing several files renames them one after another.
const settle = 5 * time.Millisecond

// delayAfter returns how long to wait after ev before reloading.
func delayAfter(ev fsnotify.Event) time.Duration {
	if ev.Has(fsnotify.Write) || ev.Has(fsnotify.Chmod) {
		return debounce
	}
	return settle
}

// Source feeds a Store from manifests and keeps it current as they change.
type Source struct {
	opts  Options
	store *model.Store
	log   klog.Logger
	// programmed, when set, is closed once what the first load gave is
	// programmed (see WriteAfter); pending is closed when the first
	// load's deferred writes are done.
	programmed <-chan struct{}
	pending    chan struct{}
	// reported are the errors and warnings the last load logged, by text.
	reported map[string]bool
	// follow reads a publication's changes from its journal; nil for
	// manifests in a directory.
	follow *follower
}

// firstWritesWait bounds how long the first load's writes wait for
// programmed: a data plane that cannot sync must not keep the
// allocations unwritten.
const firstWritesWait = time.Minute

// WriteAfter makes the first load's writes (the state file, and the decode
// cache a cold start fills) wait until programmed is closed, at most
// firstWritesWait, so that they do not compete with the data plane's
// first full sync for the node's CPUs: at 10k Services, encoding and
// writing them is about half a second of CPU, run beside a full sync of
// about one second on a 2-CPU node. Call it before Run. Serving the load
// first is safe for the reason load's deferState is (Reconcile is
// deterministic); a reload waits for the writes before it loads, as the
// Cache serves one load at a time.
func (s *Source) WriteAfter(programmed <-chan struct{}) { s.programmed = programmed }

// New returns a Source; it starts nothing. Its loads share a Cache (one of
// opts' own when set), so a reload decodes only the documents that changed.
func New(opts Options, store *model.Store, log klog.Logger) *Source {
	if opts.Cache == nil {
		opts.Cache = NewCache()
	}
	s := &Source{opts: opts, store: store, log: log}
	if !isDir(opts.Path) {
		s.follow = newFollower(opts.Path, opts, log)
	}
	return s
}

// Run loads the manifests, marks the store synced, then reloads on every change
// until ctx is done. A reload that fails (unreadable file or state) is logged and
// leaves the store as it was; invalid objects are logged one by one. Run returns an
// error only when the first load or the watch cannot be set up.
func (s *Source) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching manifests: %w", err)
	}
	defer w.Close()
	dir := s.opts.Path
	if !isDir(dir) {
		dir = filepath.Dir(dir)
	}
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watching manifests in %s: %w", dir, err)
	}
	var bg sync.WaitGroup
	defer bg.Wait()
	if err := s.reload(ctx, &bg, true); err != nil {
		return err
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if s.relevant(ev.Name) {
				s.opts.Cache.Forget(ev.Name)
				d := delayAfter(ev)
				if s.follow != nil && filepath.Clean(ev.Name) == filepath.Clean(s.follow.journal) {
					d = settle // appended a record at a time; a partial one waits
				}
				timer.Reset(d)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Error(err, "Watching manifests", "path", s.opts.Path)
		case <-timer.C:
			if s.followJournal() {
				continue
			}
			if err := s.reload(ctx, &bg, false); err != nil {
				s.log.Error(err, "Reloading manifests; keeping the previous state", "path", s.opts.Path)
			}
		}
	}
}

// relevant reports whether a change of name can change what is loaded.
func (s *Source) relevant(name string) bool {
	if isDir(s.opts.Path) {
		return isManifestName(filepath.Base(name))
	}
	name = filepath.Clean(name)
	return name == filepath.Clean(s.opts.Path) || name == filepath.Clean(s.follow.journal)
}

// followJournal writes to the store the changes the publication's journal
// holds since the last read; false when the publication is to be read
// whole.
func (s *Source) followJournal() bool {
	if s.follow == nil || !s.follow.following() {
		return false
	}
	start := time.Now()
	n, ok := s.follow.catchUp(s.store)
	s.opts.Metrics.followed(n)
	if ok {
		s.log.V(2).Info("Followed the publication's journal", "path", s.opts.Path, "records", n, "publication", s.follow.seq, "took", time.Since(start))
	}
	return ok
}

// reload loads the manifests and feeds the store; the allocations are
// persisted after, off the path from a change to the kernel, and a failure
// to persist them is logged (the next reload writes them again). The decode
// cache a first load fills is written by a goroutine in bg (encoding 10,000
// Services and their slices takes about half a second), which Run waits
// for before it returns. The first load's writes wait for programmed when
// it is set (WriteAfter).
func (s *Source) reload(ctx context.Context, bg *sync.WaitGroup, first bool) error {
	if s.pending != nil {
		<-s.pending
		s.pending = nil
	}
	var head PublicationHeader
	var headOK bool
	var headID fileStat
	if s.follow != nil {
		s.follow.stop()
		head, headOK, headID, _ = readPublicationHeader(s.opts.Path)
	}
	l, err := load(s.opts, true)
	if err != nil {
		return err
	}
	if headOK {
		// The header read before the load is the loaded publication's
		// when the file is still the same after it.
		after, ok, id, _ := readPublicationHeader(s.opts.Path)
		headOK = ok && after == head && id == headID
	}
	defer func() {
		if first && s.programmed != nil {
			done := make(chan struct{})
			s.pending = done
			bg.Go(func() {
				defer close(done)
				wait := time.NewTimer(firstWritesWait)
				defer wait.Stop()
				select {
				case <-s.programmed:
				case <-ctx.Done():
				case <-wait.C:
				}
				s.write(l)
				l.writeCache()
			})
			return
		}
		s.write(l)
		if l.cache != nil {
			bg.Go(l.writeCache)
		}
	}()
	s.report(l)
	applying := time.Now()
	l.apply(s.store)
	s.opts.Metrics.loaded()
	if headOK {
		s.follow.reset(head, headID, l.API)
		s.followJournal() // the records appended since the publication
	}
	s.log.V(2).Info("Loaded manifests", append([]any{"path", s.opts.Path, "services", len(l.Services), "endpointSlices", len(l.EndpointSlices), "invalid", len(l.Errors)},
		append(l.Timings(), "apply", time.Since(applying))...)...)
	return nil
}

// report logs what is wrong with the objects of l that the last load did
// not report (an invalid object left out, one not fully served), and what
// it reported that is no longer so: every reload gives them all again, and
// a manifest edited once a second would repeat each one as often. The
// count of invalid objects is in every load's V(2) line.
func (s *Source) report(l *Loaded) {
	now := make(map[string]bool, len(l.Errors)+len(l.Warnings))
	for _, e := range l.Errors {
		if msg := e.Error(); !now[msg] {
			now[msg] = true
			if !s.reported[msg] {
				s.log.Error(e, "Invalid object left out")
			}
		}
	}
	for _, w := range l.Warnings {
		if msg := w.Error(); !now[msg] {
			now[msg] = true
			if !s.reported[msg] {
				s.log.Info("Object not fully served", "reason", msg)
			}
		}
	}
	for _, msg := range slices.Sorted(maps.Keys(s.reported)) {
		if !now[msg] {
			s.log.Info("No longer reported", "was", msg)
		}
	}
	s.reported = now
}

// write persists the allocations of l, logging a failure.
func (s *Source) write(l *Loaded) {
	if err := l.persistState(); err != nil {
		s.log.Error(err, "Persisting allocations; serving them anyway", "path", s.opts.Path)
	}
}

package file

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/model"
)

// follower keeps a Source that reads a publication current from the
// publication's journal (see Publisher): each record's objects are
// converted and written to the store one by one, as the kube source does
// with an API server's watch events, so a change costs the reader what it
// changed, not what the publication holds. It holds the result the reader
// serves (the one its last whole read reconciled, with the records since
// applied) to tell which Services a change of a label or a slice touches.
type follower struct {
	path, journal string
	// proxyName and all choose the Services served, as Options.
	proxyName string
	all       bool
	log       klog.Logger

	// id is the journal followed ("": none, the next change is read
	// whole) and seq the publication the store holds.
	id  string
	seq uint64
	// pub is the identity of the publication numbered seq when it was
	// seen (zero: not yet): another file under that number is an edit
	// the journal does not hold.
	pub fileStat
	// f is the journal open, ino its inode, off where its next line
	// starts.
	f   *os.File
	ino uint64
	off int64

	services map[model.ServiceKey]*corev1.Service
	slices   map[model.ServiceKey]*discoveryv1.EndpointSlice // by namespace/name
	bySvc    map[model.ServiceKey]map[string]*discoveryv1.EndpointSlice
	nodes    map[string]*corev1.Node
	pods     map[model.PodKey]*corev1.Pod
}

func newFollower(path string, opts Options, log klog.Logger) *follower {
	return &follower{path: path, journal: JournalPathFor(path), proxyName: opts.ServiceProxyName, all: opts.AllServices, log: log}
}

// following reports whether the next change can be read from the journal.
func (f *follower) following() bool { return f.id != "" }

// stop forgets the journal: the next change is read whole.
func (f *follower) stop() {
	if f.f != nil {
		f.f.Close()
	}
	f.f, f.id, f.off, f.ino = nil, "", 0, 0
}

// reset makes the follower hold res, the result of a whole read of the
// publication h, the file of identity id, and opens h's journal; it
// follows nothing when the journal is gone or another.
func (f *follower) reset(h PublicationHeader, id fileStat, res controlplane.Result) {
	f.stop()
	f.services = make(map[model.ServiceKey]*corev1.Service, len(res.Services))
	f.slices = make(map[model.ServiceKey]*discoveryv1.EndpointSlice, len(res.EndpointSlices))
	f.bySvc = make(map[model.ServiceKey]map[string]*discoveryv1.EndpointSlice, len(res.Services))
	f.nodes = make(map[string]*corev1.Node, len(res.Nodes))
	f.pods = make(map[model.PodKey]*corev1.Pod, len(res.Pods))
	for _, s := range res.Services {
		f.services[model.ServiceKey{Namespace: s.Namespace, Name: s.Name}] = s
	}
	for _, s := range res.EndpointSlices {
		f.putSlice(s)
	}
	for _, n := range res.Nodes {
		f.nodes[n.Name] = n
	}
	for _, p := range res.Pods {
		f.pods[model.PodKey{Namespace: p.Namespace, Name: p.Name}] = p
	}
	f.seq, f.pub = h.Seq, id
	if err := f.open(func(jh journalHeader) bool { return jh.Journal == h.Journal && jh.Base <= h.Seq }); err != nil {
		f.log.V(2).Info("Not following the publication's journal; reading every change whole", "journal", f.journal, "reason", err.Error())
	}
}

// errJournalMoved: the journal does not continue what the store holds.
var errJournalMoved = errors.New("the journal does not continue the publication held")

// open opens the journal and follows it when its header is accepted.
func (f *follower) open(accept func(journalHeader) bool) error {
	file, err := os.Open(f.journal)
	if err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(file.Fd()), &st); err != nil {
		file.Close()
		return err
	}
	line, err := bufio.NewReader(file).ReadSlice('\n')
	var jh journalHeader
	if err == nil {
		err = json.Unmarshal(line, &jh)
	}
	if err != nil || !accept(jh) {
		file.Close()
		if err == nil {
			err = errJournalMoved
		}
		return err
	}
	f.f, f.ino, f.off, f.id = file, st.Ino, int64(len(line)), jh.Journal
	return nil
}

// maxJournalSwitches bounds how many journals one catch-up follows.
const maxJournalSwitches = 4

// catchUp writes to store the records of the journal after the
// publication it holds, following the journal into the one that continues
// it. It returns false when the change must be read whole: the journal
// has a gap, is unreadable, was started anew, or is behind the
// publication; the follower then follows nothing.
func (f *follower) catchUp(store *model.Store) (records int, ok bool) {
	if !f.following() {
		return 0, false
	}
	for range maxJournalSwitches {
		n, err := f.readRecords(store)
		records += n
		if err != nil {
			f.log.V(2).Info("Reading the publication whole", "journal", f.journal, "reason", err.Error())
			f.stop()
			return records, false
		}
		var st syscall.Stat_t
		if err := syscall.Stat(f.journal, &st); err == nil && st.Ino == f.ino {
			break
		}
		// Replaced: its records are all read; the new one must continue it.
		id, seq := f.id, f.seq
		f.stop()
		if err := f.open(func(jh journalHeader) bool { return jh.Prev == id && jh.Base == seq }); err != nil {
			f.log.V(2).Info("Reading the publication whole", "journal", f.journal, "reason", err.Error())
			return records, false
		}
	}
	h, ok, id, err := readPublicationHeader(f.path)
	if err != nil || !ok || h.Seq > f.seq || h.Seq == f.seq && f.pub != (fileStat{}) && id != f.pub {
		f.log.V(2).Info("Reading the publication whole", "path", f.path, "held", f.seq, "published", h.Seq, "header", ok)
		f.stop()
		return records, false
	}
	if h.Seq == f.seq {
		f.pub = id
	}
	return records, true
}

// readRecords applies the complete records after off; a record of a
// publication held already is skipped.
func (f *follower) readRecords(store *model.Store) (int, error) {
	if _, err := f.f.Seek(f.off, io.SeekStart); err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(f.f, 1<<16)
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return n, nil // a partial line is a record being written
		}
		if err != nil {
			return n, err
		}
		var rec journalRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return n, fmt.Errorf("record after publication %d: %w", f.seq, err)
		}
		switch {
		case rec.Seq <= f.seq:
		case rec.Seq == f.seq+1:
			if err := f.apply(store, rec); err != nil {
				return n, err
			}
			f.seq, f.pub = rec.Seq, fileStat{}
			n++
		default:
			return n, fmt.Errorf("record %d after publication %d: a gap", rec.Seq, f.seq)
		}
		f.off += int64(len(line))
	}
}

// apply writes one record to the follower's result and to store.
func (f *follower) apply(store *model.Store, rec journalRecord) error {
	origin := f.journal + "#" + strconv.FormatUint(rec.Seq, 10)
	touched := map[model.ServiceKey]bool{}
	var nodes []string
	var pods []model.PodKey
	for _, raw := range rec.Put {
		objs, errs := decodeDoc(origin, raw)
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		for _, o := range objs {
			switch obj := o.Obj.(type) {
			case *corev1.Service:
				k := model.ServiceKey{Namespace: obj.Namespace, Name: obj.Name}
				f.services[k] = obj
				touched[k] = true
			case *discoveryv1.EndpointSlice:
				if old := f.slices[model.ServiceKey{Namespace: obj.Namespace, Name: obj.Name}]; old != nil {
					f.dropSlice(old) // the store moves it (SetEndpointSlice)
				}
				f.putSlice(obj)
				touched[sliceService(obj)] = true
			case *corev1.Node:
				f.nodes[obj.Name] = obj
				nodes = append(nodes, obj.Name)
			case *corev1.Pod:
				k := model.PodKey{Namespace: obj.Namespace, Name: obj.Name}
				f.pods[k] = obj
				pods = append(pods, k)
			default:
				return fmt.Errorf("%s: a %T is no object of a publication's result", origin, o.Obj)
			}
		}
	}
	var gone []model.ServiceKey // slices deleted
	for _, ref := range rec.Delete {
		k := model.ServiceKey{Namespace: ref.Namespace, Name: ref.Name}
		switch ref.Kind {
		case "Service":
			delete(f.services, k)
			touched[k] = true
		case "EndpointSlice":
			if old := f.slices[k]; old != nil {
				f.dropSlice(old)
				gone = append(gone, k)
			}
		case "Node":
			delete(f.nodes, ref.Name)
			nodes = append(nodes, ref.Name)
		case "Pod":
			pk := model.PodKey{Namespace: ref.Namespace, Name: ref.Name}
			delete(f.pods, pk)
			pods = append(pods, pk)
		default:
			return fmt.Errorf("%s: cannot delete a %s", origin, ref.Kind)
		}
	}
	store.Update(func(tx *model.Txn) {
		for _, k := range gone {
			tx.DeleteEndpointSlice(k.Namespace, k.Name)
		}
		for _, k := range sortedKeys(touched) {
			f.write(tx, k)
		}
		for _, name := range nodes {
			convertOrDelete(f.log, f.nodes[name], model.NodeFromAPI, tx.SetNode, func() { tx.DeleteNode(name) })
		}
		for _, k := range pods {
			convertOrDelete(f.log, f.pods[k], model.PodFromAPI, tx.SetPod, func() { tx.DeletePod(k) })
		}
	})
	return nil
}

// write makes tx hold Service k and its slices as the follower's result
// gives them, as Loaded.convert would.
func (f *follower) write(tx *model.Txn, k model.ServiceKey) {
	svc := f.services[k]
	skipped := svc != nil && !f.all && svc.Labels[model.LabelServiceProxyName] != f.proxyName
	if skipped {
		svc = nil
	}
	convertOrDelete(f.log, svc, model.ServiceFromAPI, tx.SetService, func() { tx.DeleteService(k) })
	names := make([]string, 0, len(f.bySvc[k]))
	for name := range f.bySvc[k] {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sl := f.bySvc[k][name]
		if skipped {
			tx.DeleteEndpointSlice(sl.Namespace, sl.Name)
			continue
		}
		m, ok, err := model.EndpointSliceFromAPI(sl)
		if err != nil {
			f.log.Error(err, "Invalid object left out")
		}
		if err != nil || !ok {
			tx.DeleteEndpointSlice(sl.Namespace, sl.Name)
			continue
		}
		tx.SetEndpointSlice(m)
	}
}

// convertOrDelete sets what obj converts to, or deletes it when obj is nil
// or does not convert (logged, as a whole read leaves it out).
func convertOrDelete[A, M any](log klog.Logger, obj *A, convert func(*A) (M, error), set func(M), del func()) {
	if obj == nil {
		del()
		return
	}
	m, err := convert(obj)
	if err != nil {
		log.Error(err, "Invalid object left out")
		del()
		return
	}
	set(m)
}

// sliceService is the Service a slice belongs to (its
// kubernetes.io/service-name label).
func sliceService(s *discoveryv1.EndpointSlice) model.ServiceKey {
	return model.ServiceKey{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
}

func (f *follower) putSlice(s *discoveryv1.EndpointSlice) {
	f.slices[model.ServiceKey{Namespace: s.Namespace, Name: s.Name}] = s
	k := sliceService(s)
	if f.bySvc[k] == nil {
		f.bySvc[k] = map[string]*discoveryv1.EndpointSlice{}
	}
	f.bySvc[k][s.Name] = s
}

func (f *follower) dropSlice(s *discoveryv1.EndpointSlice) {
	delete(f.slices, model.ServiceKey{Namespace: s.Namespace, Name: s.Name})
	k := sliceService(s)
	delete(f.bySvc[k], s.Name)
	if len(f.bySvc[k]) == 0 {
		delete(f.bySvc, k)
	}
}

func sortedKeys(m map[model.ServiceKey]bool) []model.ServiceKey {
	out := make([]model.ServiceKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, model.CompareServiceKeys)
	return out
}

package file

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/controlplane"
)

// A publication is a cluster written whole for readers of --state (the
// lab's cluster/cluster.yaml): every object as given, as JSON lines, each
// after a "---". A Publisher also keeps a journal beside it, so that a
// long-lived reader (a node's proxy, cluster DNS) that holds the
// publication takes one change without reading the others: with 10,000
// Services and a slice each, reading the whole file again costs a reader
// 33-35 ms a changed Service, the journal's record 0.24-0.26 ms (0.14-0.17
// ms with 1,000 Services: the store's copy on write grows with them;
// BenchmarkPublicationChange on an idle 2-CPU machine).
//
// The publication's first line names where it stands:
//
//	--- # svcnet-publication {"seq":N,"journal":"ID"}
//
// (a YAML document separator with a comment, so every YAML reader sees the
// same documents). Every publication has a number of its own, even one
// whose result did not change (its record is empty): a publication
// rewritten under a number already seen is not the publisher's, and
// readers read it whole. The journal, JournalPathFor the publication, is one
// JSON line of header, {"journal":"ID","base":B,"prev":"P"}, then one line
// per publication after B: {"seq":N,"put":[objects],"delete":[refs]}, the
// control plane's result objects (Services as allocated, EndpointSlices,
// Nodes, Pods) that changed from publication N-1 to N, and those it no
// longer holds. A record is appended before its publication is renamed
// into place, so the journal is never behind a publication a reader saw
// except after a crash; a reader that finds a gap, a journal whose prev is
// not the one it followed, or a publication ahead of its journal reads the
// publication whole (see follower). A journal grown past the publication's
// size starts again (its prev the old one, its first record the change
// that made it grow), and a publisher that remembers nothing (a new
// process) or a change of more than half that size starts a journal
// without prev: readers then read the publication whole, which costs them
// no more than the change would.

// publicationMark starts a publication's first line.
const publicationMark = "--- # svcnet-publication "

// PublicationHeader is where a publication stands: its sequence number and
// the journal whose records continue it.
type PublicationHeader struct {
	Seq     uint64 `json:"seq"`
	Journal string `json:"journal"`
}

// journalHeader is a journal's first line: its id, the publication its
// first record follows, and the journal it continues ("": none).
type journalHeader struct {
	Journal string `json:"journal"`
	Base    uint64 `json:"base"`
	Prev    string `json:"prev,omitempty"`
}

// journalRecord is publication Seq's change from the one before.
type journalRecord struct {
	Seq    uint64            `json:"seq"`
	Put    []json.RawMessage `json:"put,omitempty"`
	Delete []ObjectRef       `json:"delete,omitempty"`
}

// ObjectRef names one object of a publication's result.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// JournalPathFor is where the journal of the publication at path is kept:
// DIR/.NAME.svcnet-journal (a dotfile: never read as a manifest).
func JournalPathFor(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".svcnet-journal")
}

// readPublicationHeader returns the header of the publication at path,
// and the identity of the file it read; ok false when the file has none
// (it is not a publication, or one written by an older svcnet).
func readPublicationHeader(path string) (h PublicationHeader, ok bool, id fileStat, err error) {
	f, err := os.Open(path)
	if err != nil {
		return h, false, id, err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return h, false, id, fmt.Errorf("reading %s: %w", path, err)
	}
	line, err := bufio.NewReaderSize(f, 256).ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return h, false, id, fmt.Errorf("reading %s: %w", path, err)
	}
	h, ok = parsePublicationHeader(line)
	return h, ok, identity(&st), nil
}

func parsePublicationHeader(line []byte) (PublicationHeader, bool) {
	var h PublicationHeader
	rest, ok := bytes.CutPrefix(line, []byte(publicationMark))
	if !ok || json.Unmarshal(bytes.TrimSpace(rest), &h) != nil || h.Journal == "" {
		return PublicationHeader{}, false
	}
	return h, true
}

// EncodeJSON writes obj as one line of JSON with its apiVersion and kind,
// as a publication holds it: each document a JSON line (JSON is YAML).
// 10,000 Services with their EndpointSlices take 35 ms as JSON and 1.17 s
// as YAML, and readers decode JSON without YAML's parser.
func EncodeJSON(obj runtime.Object) ([]byte, error) {
	obj, err := WithKind(obj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// WithKind returns obj when it names its apiVersion and kind, else a copy
// of it that does.
func WithKind(obj runtime.Object) (runtime.Object, error) {
	if !obj.GetObjectKind().GroupVersionKind().Empty() {
		return obj, nil
	}
	obj = obj.DeepCopyObject()
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return nil, fmt.Errorf("%T: unknown kind: %w", obj, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	return obj, nil
}

// Encoder encodes one object as a publication's JSON line: its apiVersion
// and kind set. It may give the same bytes for the same object again.
type Encoder func(runtime.Object) ([]byte, error)

// Publisher writes publications at one path, and their journal.
type Publisher struct {
	path string
	// remember keeps the last publication's result (last), so that the
	// next one is journaled as a change: for a long-lived publisher.
	remember bool
	// journal is the journal being appended to, and its size; seq the
	// last publication's number. Valid while last is not nil.
	journal string
	size    int64
	seq     uint64
	// minSize is the size a journal may reach before it starts again,
	// whatever the publication's (minJournalSize).
	minSize int64
	// last is each result object of the last publication, by reference,
	// with the object and the digest of its encoding.
	last map[ObjectRef]publishedObject
	// wrote are the identities of the publication and the journal as the
	// last publication left them: another writer's publication changes
	// them, and last is then no base for a change.
	wrote [2]fileStat
}

type publishedObject struct {
	obj runtime.Object
	sum [sha256.Size]byte
}

// NewPublisher returns a Publisher of the publication at path; remember
// makes it keep what it published last, so that a publication after the
// first is a journal record (a long-lived publisher; a one-shot one
// starts a journal on every publication).
func NewPublisher(path string, remember bool) *Publisher {
	return &Publisher{path: path, remember: remember, minSize: minJournalSize}
}

// minJournalSize is the size a journal may reach before it starts again,
// whatever the publication's; a record of more than half the size a
// journal may reach starts one without prev.
const minJournalSize = 1 << 20

// Publish writes docs as the publication, each encoded by enc, and journals
// res, the control plane's result for them, as the change from the last
// publication. The publication is written atomically; a failure to write
// the journal makes the next publication start one without prev.
func (p *Publisher) Publish(docs []runtime.Object, res controlplane.Result, enc Encoder) error {
	if p.last != nil && p.identities() != p.wrote {
		p.last = nil // published by another since
	}
	var objs []resultObject
	if p.remember {
		objs = resultObjects(res) // else no change is journaled: no need to tell them
	}
	next := make(map[ObjectRef]publishedObject, len(objs))
	var put []json.RawMessage
	var del []ObjectRef
	for _, o := range objs {
		old, had := p.last[o.ref]
		if had && old.obj == o.obj {
			next[o.ref] = old
			continue
		}
		b, err := enc(o.obj)
		if err != nil {
			return fmt.Errorf("publishing %s %s: %w", o.ref.Kind, refName(o.ref), err)
		}
		sum := sha256.Sum256(b)
		next[o.ref] = publishedObject{obj: o.obj, sum: sum}
		// Without a last publication the journal starts anew and records
		// nothing: the digest is kept for the next one alone.
		if p.last != nil && (!had || old.sum != sum) {
			put = append(put, b)
		}
	}
	for ref := range p.last {
		if _, ok := next[ref]; !ok {
			del = append(del, ref)
		}
	}
	sortRefs(del)
	h, err := p.journalChange(put, del)
	if err != nil {
		p.last = nil
		return err
	}
	err = atomicfile.WriteFunc(p.path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		hb, _ := json.Marshal(h)
		bw.WriteString(publicationMark)
		bw.Write(hb)
		bw.WriteByte('\n')
		for i, o := range docs {
			b, err := enc(o)
			if err != nil {
				return fmt.Errorf("publishing object %d: %w", i+1, err)
			}
			if i > 0 {
				bw.WriteString("---\n")
			}
			bw.Write(b)
			bw.WriteByte('\n')
		}
		return bw.Flush()
	})
	if err != nil {
		p.last = nil
		return err
	}
	if p.remember {
		p.last, p.seq, p.wrote = next, h.Seq, p.identities()
	}
	return nil
}

// identities are the publication's and the journal's.
func (p *Publisher) identities() [2]fileStat {
	pub, _ := statFile(p.path)
	j, _ := statFile(JournalPathFor(p.path))
	return [2]fileStat{pub, j}
}

// journalChange journals the change (put, del) and returns the header of
// the publication that follows it.
func (p *Publisher) journalChange(put []json.RawMessage, del []ObjectRef) (PublicationHeader, error) {
	if p.last == nil {
		// Nothing remembered: a journal of its own, after the
		// publication this one replaces.
		var seq uint64
		if h, ok, _, _ := readPublicationHeader(p.path); ok {
			seq = h.Seq
		}
		return p.startJournal(seq+1, "", nil)
	}
	seq := p.seq + 1 // a record even when nothing changed: every publication has a number of its own
	rec, err := json.Marshal(journalRecord{Seq: seq, Put: put, Delete: del})
	if err != nil {
		return PublicationHeader{}, fmt.Errorf("journal: %w", err)
	}
	rec = append(rec, '\n')
	limit := p.minSize
	if fi, err := os.Stat(p.path); err == nil && fi.Size() > limit {
		limit = fi.Size()
	}
	if int64(len(rec)) > limit/2 {
		return p.startJournal(seq, "", nil)
	}
	if p.size+int64(len(rec)) > limit {
		return p.startJournal(p.seq, p.journal, rec)
	}
	if err := appendFile(JournalPathFor(p.path), rec); err != nil {
		// Readers of the broken journal read the publication whole.
		return p.startJournal(seq, "", nil)
	}
	p.size += int64(len(rec))
	return PublicationHeader{Seq: seq, Journal: p.journal}, nil
}

// startJournal writes a new journal after publication base, continuing
// prev (""), with rec its first record (nil: none), and returns the
// header of the publication it leads to.
func (p *Publisher) startJournal(base uint64, prev string, rec []byte) (PublicationHeader, error) {
	id, err := newJournalID()
	if err != nil {
		return PublicationHeader{}, err
	}
	hb, err := json.Marshal(journalHeader{Journal: id, Base: base, Prev: prev})
	if err != nil {
		return PublicationHeader{}, fmt.Errorf("journal: %w", err)
	}
	content := append(append(hb, '\n'), rec...)
	if err := atomicfile.Write(JournalPathFor(p.path), content, 0o644); err != nil {
		return PublicationHeader{}, fmt.Errorf("journal: %w", err)
	}
	p.journal, p.size = id, int64(len(content))
	seq := base
	if rec != nil {
		seq++
	}
	return PublicationHeader{Seq: seq, Journal: id}, nil
}

func newJournalID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("journal id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// appendFile appends b to the file at path, which must exist, in one write.
func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// resultObject is one object of a result, with its reference.
type resultObject struct {
	ref ObjectRef
	obj runtime.Object
}

// resultObjects lists the objects of res that readers of a publication
// turn into the model: Services, EndpointSlices, Nodes and Pods.
func resultObjects(res controlplane.Result) []resultObject {
	out := make([]resultObject, 0, len(res.Services)+len(res.EndpointSlices)+len(res.Nodes)+len(res.Pods))
	for _, s := range res.Services {
		out = append(out, resultObject{serviceRef(s), s})
	}
	for _, s := range res.EndpointSlices {
		out = append(out, resultObject{sliceRef(s), s})
	}
	for _, n := range res.Nodes {
		out = append(out, resultObject{ObjectRef{Kind: "Node", Name: n.Name}, n})
	}
	for _, pod := range res.Pods {
		out = append(out, resultObject{ObjectRef{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}, pod})
	}
	return out
}

func serviceRef(s *corev1.Service) ObjectRef {
	return ObjectRef{Kind: "Service", Namespace: s.Namespace, Name: s.Name}
}

func sliceRef(s *discoveryv1.EndpointSlice) ObjectRef {
	return ObjectRef{Kind: "EndpointSlice", Namespace: s.Namespace, Name: s.Name}
}

func refName(r ObjectRef) string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

func sortRefs(refs []ObjectRef) {
	slices.SortFunc(refs, func(a, b ObjectRef) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

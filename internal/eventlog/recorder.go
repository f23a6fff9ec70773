package eventlog

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
)

// File is a record.EventRecorder that keeps its events in the file at
// Path (Add), named and stamped as client-go's recorder names them, from
// Source. A failure to write is passed to OnError and the event is lost,
// as a recorder drops what it cannot send. Safe for concurrent use.
type File struct {
	Path    string
	Source  corev1.EventSource
	OnError func(error)
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
}

var _ record.EventRecorder = (*File)(nil)

func (f *File) Event(obj runtime.Object, typ, reason, msg string) {
	ref, err := reference.GetReference(scheme.Scheme, obj)
	if err != nil {
		f.fail(fmt.Errorf("event %s: %w", reason, err))
		return
	}
	now := time.Now()
	if f.Now != nil {
		now = f.Now()
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	t := metav1.NewTime(now)
	e := corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject: *ref, Reason: reason, Message: msg, Type: typ, Source: f.Source,
		FirstTimestamp: t, LastTimestamp: t, Count: 1,
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := Add(f.Path, []corev1.Event{e}, now); err != nil {
		f.fail(err)
	}
}

func (f *File) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	f.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (f *File) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	f.Eventf(obj, typ, reason, format, args...)
}

func (f *File) fail(err error) {
	if f.OnError != nil {
		f.OnError(err)
	}
}

// Command kdesc writes the golden files of github.com/svcnet/svcnet's
// internal/describe tests: what kubectl v0.36.3's own PodDescriber and
// NodeDescriber write for the objects the tests' fixtures build (copied
// into fixtures_gen.go by gen.sh), served by client-go's fake clientset.
//
// The fixtures date everything relative to now; kubectl counts ages from
// time.Now(). So kdesc runs the describers right after a second begins,
// with now that second, and writes now to testdata/now for the tests.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/kubectl/pkg/describe"
)

func main() {
	out := flag.String("out", "", "directory to write the golden files and now to (internal/describe/testdata)")
	flag.Parse()
	if *out == "" {
		log.Fatal("-out is required")
	}
	for attempt := 1; ; attempt++ {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)))
		now := time.Now().UTC().Truncate(time.Second)
		files, err := describeAll(now)
		if err != nil {
			log.Fatal(err)
		}
		if elapsed := time.Since(now); elapsed >= 900*time.Millisecond {
			if attempt == 5 {
				log.Fatalf("describing took until %v past now; ages would be off", elapsed)
			}
			continue
		}
		files["now"] = now.Format(time.RFC3339) + "\n"
		if err := os.MkdirAll(*out, 0o755); err != nil {
			log.Fatal(err)
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(*out, name), []byte(text), 0o644); err != nil {
				log.Fatal(err)
			}
			fmt.Println("wrote", filepath.Join(*out, name))
		}
		return
	}
}

// describeAll returns kubectl's description of each fixture case, by
// golden file name.
func describeAll(now time.Time) (map[string]string, error) {
	settings := describe.DescriberSettings{ShowEvents: true, ChunkSize: 500}
	files := map[string]string{}
	for _, c := range podCases(now) {
		objs := []runtime.Object{c.pod}
		for i := range c.events {
			objs = append(objs, &c.events[i])
		}
		text, err := (&describe.PodDescriber{Interface: client{newClient(objs...)}}).Describe(c.pod.Namespace, c.pod.Name, settings)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.golden, err)
		}
		files[c.golden] = text
	}
	for _, c := range nodeCases(now) {
		objs := []runtime.Object{c.node}
		for i := range c.pods {
			objs = append(objs, &c.pods[i])
		}
		if c.lease != nil {
			objs = append(objs, c.lease)
		}
		for i := range c.events {
			objs = append(objs, &c.events[i])
		}
		text, err := (&describe.NodeDescriber{Interface: client{newClient(objs...)}}).Describe("", c.node.Name, settings)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.golden, err)
		}
		files[c.golden] = text
	}
	return files, nil
}

// newClient is a fake clientset holding objs whose pod and event lists
// honour field selectors and list pods by namespace and name, as the API
// server does (the fake ignores field selectors and lists in map order).
func newClient(objs ...runtime.Object) *fake.Clientset {
	cs := fake.NewSimpleClientset(objs...)
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		la := a.(k8stesting.ListAction)
		obj, err := cs.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), la.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.PodList)
		var items []corev1.Pod
		for _, p := range list.Items {
			if la.GetListRestrictions().Fields.Matches(fields.Set{
				"metadata.name": p.Name, "metadata.namespace": p.Namespace,
				"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase),
			}) {
				items = append(items, p)
			}
		}
		sort.Slice(items, func(i, j int) bool {
			if items[i].Namespace != items[j].Namespace {
				return items[i].Namespace < items[j].Namespace
			}
			return items[i].Name < items[j].Name
		})
		list.Items = items
		return true, list, nil
	})
	cs.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		la := a.(k8stesting.ListAction)
		obj, err := cs.Tracker().List(corev1.SchemeGroupVersion.WithResource("events"), corev1.SchemeGroupVersion.WithKind("Event"), la.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.EventList)
		var items []corev1.Event
		for _, e := range list.Items {
			o := e.InvolvedObject
			if la.GetListRestrictions().Fields.Matches(fields.Set{
				"involvedObject.kind": o.Kind, "involvedObject.namespace": o.Namespace,
				"involvedObject.name": o.Name, "involvedObject.uid": string(o.UID),
			}) {
				items = append(items, e)
			}
		}
		sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
		list.Items = items
		return true, list, nil
	})
	return cs
}

// client is the fake clientset with the events client's field selector
// for an involved object the real one's: the fake's selects everything,
// and kubectl's describers use it to search an object's events.
type client struct{ *fake.Clientset }

func (c client) CoreV1() corev1client.CoreV1Interface { return coreV1{c.Clientset.CoreV1()} }

type coreV1 struct{ corev1client.CoreV1Interface }

func (c coreV1) Events(namespace string) corev1client.EventInterface {
	return events{c.CoreV1Interface.Events(namespace)}
}

type events struct{ corev1client.EventInterface }

// GetFieldSelector is client-go's (typed/core/v1/event_expansion.go).
func (events) GetFieldSelector(name, namespace, kind, uid *string) fields.Selector {
	field := fields.Set{}
	if name != nil {
		field["involvedObject.name"] = *name
	}
	if namespace != nil {
		field["involvedObject.namespace"] = *namespace
	}
	if kind != nil {
		field["involvedObject.kind"] = *kind
	}
	if uid != nil {
		field["involvedObject.uid"] = *uid
	}
	return field.AsSelector()
}

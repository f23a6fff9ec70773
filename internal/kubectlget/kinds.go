//lint:file-ignore SA1019 kubectl get lists v1 Endpoints (get ep), as kubectl does

package kubectlget

import (
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lb/pool"
	"github.com/svcnet/svcnet/internal/printers"
)

// Object is what get prints: an API object with its metadata.
type Object interface {
	runtime.Object
	metav1.Object
}

// kind is one resource type get lists.
type kind struct {
	// resource is the plural name; aliases the other names get takes.
	resource string
	aliases  []string
	// prefix is kubectl's KIND/NAME prefix: the kind in lower case, with
	// its group when it is not the core group.
	prefix string
	// qualified is the resource as the API server names it in errors:
	// the plural, with its group when it is not the core group.
	qualified  string
	namespaced bool
	// objects takes the type's objects out of a result.
	objects func(*controlplane.Result) []Object
	// table prints them as kubectl's table of the type.
	table func(w io.Writer, objs []Object, o printers.Options) error
}

func each[T Object](in []T) []Object {
	out := make([]Object, len(in))
	for i, x := range in {
		out[i] = x
	}
	return out
}

func typed[T Object](objs []Object) []T {
	out := make([]T, len(objs))
	for i, o := range objs {
		out[i] = o.(T)
	}
	return out
}

// kinds are the types get lists, in the order kubectl's "all" prints them.
var kinds = []*kind{
	{resource: "pods", aliases: []string{"pod", "po"}, prefix: "pod", namespaced: true,
		objects: func(r *controlplane.Result) []Object { return each(r.Pods) },
		table: func(w io.Writer, objs []Object, o printers.Options) error {
			return printers.Pods(w, typed[*corev1.Pod](objs), o)
		}},
	{resource: "services", aliases: []string{"service", "svc"}, prefix: "service", namespaced: true,
		objects: func(r *controlplane.Result) []Object { return each(r.Services) },
		table: func(w io.Writer, objs []Object, o printers.Options) error {
			return printers.Services(w, typed[*corev1.Service](objs), o)
		}},
	{resource: "endpoints", aliases: []string{"ep"}, prefix: "endpoints", namespaced: true,
		objects: func(r *controlplane.Result) []Object { return each(endpointsOf(r)) },
		table: func(w io.Writer, objs []Object, o printers.Options) error {
			return printers.Endpoints(w, typed[*corev1.Endpoints](objs), o)
		}},
	{resource: "endpointslices", aliases: []string{"endpointslice"}, prefix: "endpointslice.discovery.k8s.io",
		qualified: "endpointslices.discovery.k8s.io", namespaced: true,
		objects: func(r *controlplane.Result) []Object { return each(r.EndpointSlices) },
		table: func(w io.Writer, objs []Object, o printers.Options) error {
			return printers.EndpointSlices(w, typed[*discoveryv1.EndpointSlice](objs), o)
		}},
	{resource: "nodes", aliases: []string{"node", "no"}, prefix: "node",
		objects: func(r *controlplane.Result) []Object { return each(r.Nodes) },
		table: func(w io.Writer, objs []Object, o printers.Options) error {
			return printers.Nodes(w, typed[*corev1.Node](objs), o)
		}},
	{resource: "events", aliases: []string{"event", "ev"}, prefix: "event", namespaced: true,
		objects: func(r *controlplane.Result) []Object { return each(eventPtrs(r.Events)) },
		table: func(w io.Writer, objs []Object, o printers.Options) error {
			return printers.Events(w, typed[*corev1.Event](objs), o)
		}},
	{resource: "ipaddresspools", aliases: []string{"ipaddresspool", "svcpool"}, prefix: "ipaddresspool." + pool.Group,
		qualified: "ipaddresspools." + pool.Group,
		objects:   func(r *controlplane.Result) []Object { return each(r.Pools) },
		table: func(w io.Writer, objs []Object, o printers.Options) error {
			return printers.Pools(w, typed[*pool.IPAddressPool](objs), o)
		}},
}

// eventPtrs returns pointers to events' items, each with its TypeMeta.
func eventPtrs(events []corev1.Event) []*corev1.Event {
	out := make([]*corev1.Event, len(events))
	for i := range events {
		e := events[i]
		e.APIVersion, e.Kind = "v1", "Event"
		out[i] = &e
	}
	return out
}

// allKinds are the types "all" stands for (kubectl's "all" category, of
// the types svcnet holds).
var allKinds = []string{"pods", "services"}

func init() {
	for _, k := range kinds {
		if k.qualified == "" {
			k.qualified = k.resource
		}
	}
}

// kindOf returns the type a name given to get stands for.
func kindOf(name string) *kind {
	name = strings.ToLower(name)
	for _, k := range kinds {
		if k.resource == name || slices.Contains(k.aliases, name) {
			return k
		}
	}
	return nil
}

// Resources returns the plural names of the types get lists, sorted.
func Resources() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.resource
	}
	slices.Sort(out)
	return out
}

// Resource returns the plural name of the type name stands for ("" for
// none).
func Resource(name string) string {
	if k := kindOf(name); k != nil {
		return k.resource
	}
	return ""
}

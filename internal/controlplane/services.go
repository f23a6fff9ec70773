package controlplane

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// controlPlaneOrigin is the Origin of errors about objects the control plane made.
const controlPlaneOrigin = "(control plane)"

// svcEntry is a Service with where it came from. default/kubernetes made by the
// control plane has idx math.MaxInt, so an error about it comes last.
type svcEntry struct {
	entry[*corev1.Service]
	alloc *svcAlloc
}

// reconcileServices defaults, validates and allocates the Services, adds
// default/kubernetes unless a valid one is given, and returns the valid Services
// sorted with the State to persist.
func reconcileServices(cfg Config, in *intake, prev State, now time.Time) ([]*corev1.Service, State) {
	if err := cfg.Validate(); err != nil {
		for _, e := range in.services {
			in.errs.add(e.idx, e.origin, kindService, e.obj, err)
		}
		return nil, copyState(prev)
	}
	al := newAllocator(cfg)
	in.al = al
	state := State{Services: map[string]ServiceAlloc{}}
	valid := validServices(in, al, prev, state)
	if !slices.ContainsFunc(valid, func(e *svcEntry) bool { return isKubernetesService(e.obj) }) {
		first := al.ranges[al.families[0]].first.String()
		k := &svcEntry{entry: entry[*corev1.Service]{idx: math.MaxInt, origin: controlPlaneOrigin, obj: kubernetesService(first)}}
		_ = initIPFamilyFields(k.obj, al.families)
		valid = append(valid, k)
	}
	slices.SortFunc(valid, func(a, b *svcEntry) int { return compareServicePriority(a.obj, b.obj) })
	allocs := make([]*svcAlloc, len(valid))
	// The priors in one array (never grown, so the pointers hold) rather
	// than one allocation each.
	priors := make([]ServiceAlloc, 0, len(valid))
	for i, e := range valid {
		var prior *ServiceAlloc
		if p, ok := prev.Services[serviceKey(e.obj)]; ok {
			priors = append(priors, p)
			prior = &priors[len(priors)-1]
		}
		e.alloc = newSvcAlloc(e.obj, prior)
		allocs[i] = e.alloc
	}
	al.allocateAll(allocs)
	var out []*corev1.Service
	for _, e := range valid {
		a := e.alloc
		if a.err != nil {
			in.errs.add(e.idx, e.origin, kindService, e.obj, a.err)
			in.relational = true
			if a.prior != nil {
				state.Services[a.key] = copyAlloc(*a.prior)
			}
			continue
		}
		stampService(e.obj, a.prior, now)
		state.Services[a.key] = a.stateEntry()
		out = append(out, e.obj)
	}
	sortObjects(out)
	return out, state
}

// validServices prepares and validates every given Service (one a Reconciler
// reused is both already). An invalid one is
// reported; if the previous State has it, its allocations stay reserved and its
// State entry is kept, so fixing it gives it back what it had.
func validServices(in *intake, al *allocator, prev State, state State) []*svcEntry {
	var valid []*svcEntry
	pre := prevalidate(in.services, prepareServiceForCreate, validateServiceCreate)
	for i, e := range in.services {
		if e.reused {
			valid = append(valid, &svcEntry{entry: e})
			continue
		}
		svc := e.obj
		errs := prepared(in, pre, i, e, prepareServiceForCreate, validateServiceCreate)
		if len(errs) == 0 {
			errs = initIPFamilyFields(svc, al.families)
		}
		if len(errs) == 0 {
			in.keepPrepared(e.src, svc)
			valid = append(valid, &svcEntry{entry: e})
			continue
		}
		in.errs.add(e.idx, e.origin, kindService, svc, toError(errs))
		key := serviceKey(svc)
		if p, ok := prev.Services[key]; ok && svc.Name != "" && !isKubernetesService(svc) {
			al.reserve(key, p)
			state.Services[key] = copyAlloc(p)
		}
	}
	return valid
}

// stampService sets what the apiserver sets on create: UID and creation
// time, and clears what a create may not carry. A Service that names its
// own creationTimestamp keeps it, as every other kind does (stampCreated),
// with the UID that time gives: a node agent reading the Services the
// embedded control plane published then names each one as the control
// plane did, whenever it first read it. Otherwise the time (and UID) is
// the previous State's, or now.
func stampService(svc *corev1.Service, prior *ServiceAlloc, now time.Time) {
	created, uid := now, types.UID("")
	switch {
	case !svc.CreationTimestamp.IsZero():
		created = svc.CreationTimestamp.Time.UTC()
	case prior != nil:
		if !prior.Created.IsZero() {
			created = prior.Created.UTC()
		}
		uid = types.UID(prior.UID)
	}
	if uid == "" {
		uid = makeUID(kindService, svc.Namespace, svc.Name, created.Format(time.RFC3339))
	}
	svc.UID = uid
	svc.CreationTimestamp = metav1.NewTime(created)
	svc.ResourceVersion = ""
	svc.DeletionTimestamp = nil
	svc.DeletionGracePeriodSeconds = nil
}

func serviceKey(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

func isKubernetesService(svc *corev1.Service) bool {
	return svc.Namespace == kubernetesNamespace && svc.Name == kubernetesName
}

// compareServicePriority orders allocation: default/kubernetes first, as the
// apiserver creates it before anything else, then by namespace/name.
func compareServicePriority(a, b *corev1.Service) int {
	ka, kb := isKubernetesService(a), isKubernetesService(b)
	switch {
	case ka && !kb:
		return -1
	case kb && !ka:
		return 1
	}
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

func copyAlloc(a ServiceAlloc) ServiceAlloc {
	a.ClusterIPs = slices.Clone(a.ClusterIPs)
	a.NodePorts = maps.Clone(a.NodePorts)
	a.LoadBalancerIPs = slices.Clone(a.LoadBalancerIPs)
	return a
}

func copyState(s State) State {
	out := State{Services: map[string]ServiceAlloc{}}
	for k, v := range s.Services {
		out.Services[k] = copyAlloc(v)
	}
	return out
}

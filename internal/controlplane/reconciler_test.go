package controlplane

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestReconcilerMatchesReconcile: a Reconciler gives what Reconcile gives,
// call after call, as objects are replaced (a valid one by an invalid one
// and back), removed and given again; it remembers only its last call.
func TestReconcilerMatchesReconcile(t *testing.T) {
	objs := cluster()
	var r Reconciler
	check := func(step string, objs []Object, prev State) Result {
		t.Helper()
		got := r.Reconcile(dualStack, objs, prev, testNow)
		want := Reconcile(dualStack, objs, prev, testNow)
		if diff := cmp.Diff(want, got, sameErrorText); diff != "" {
			t.Fatalf("%s: Reconciler differs from Reconcile (-want +got):\n%s", step, diff)
		}
		return got
	}
	first := check("first", objs, State{})
	check("again", objs, first.State)

	i := slices.IndexFunc(objs, func(o Object) bool {
		s, ok := o.Obj.(*corev1.Service)
		return ok && s.Name == "api"
	})
	if i < 0 {
		t.Fatal("no Service api in the cluster")
	}
	bad := slices.Clone(objs)
	b := objs[i].Obj.(*corev1.Service).DeepCopy()
	b.Spec.Ports[0].Port = 0
	bad[i].Obj = b
	res := check("api made invalid", bad, first.State)
	if !slices.ContainsFunc(res.Errors, func(e *ObjectError) bool { return e.Name == "api" }) {
		t.Fatalf("api with port 0 is not an error: %v", errorStrings(res))
	}
	check("api back", objs, res.State)
	check("api removed", slices.Delete(slices.Clone(objs), i, i+1), first.State)
	check("api given again", objs, first.State)
	if got, want := len(r.memo.last), len(objs); got != want {
		t.Errorf("Reconciler remembers %d objects, want the %d of its last call", got, want)
	}
}

func TestStateEqual(t *testing.T) {
	at := testNow
	base := func() State {
		return State{
			Services: map[string]ServiceAlloc{"default/web": {UID: "u", Created: at, ClusterIPs: []string{"10.96.0.5"},
				NodePorts: map[string]int32{"TCP/80": 30080}, HealthCheckNodePort: 31000, LoadBalancerIPs: []string{"172.26.236.180"}}},
			Created: map[string]time.Time{"Pod/default/a": at},
			Pools:   map[string][]string{"p": {"172.26.236.180-172.26.236.199"}},
		}
	}
	if !base().Equal(base()) {
		t.Fatal("a State differs from its copy")
	}
	if !(State{Services: map[string]ServiceAlloc{"a": {ClusterIPs: []string{}}}}).Equal(State{Services: map[string]ServiceAlloc{"a": {}}}) {
		t.Error("an empty list differs from none")
	}
	for name, change := range map[string]func(*State){
		"uid": func(s *State) { a := s.Services["default/web"]; a.UID = "v"; s.Services["default/web"] = a },
		"created": func(s *State) {
			a := s.Services["default/web"]
			a.Created = at.Add(time.Second)
			s.Services["default/web"] = a
		},
		"cluster IP": func(s *State) { s.Services["default/web"] = ServiceAlloc{UID: "u", Created: at} },
		"node port":  func(s *State) { s.Services["default/web"].NodePorts["TCP/80"] = 30081 },
		"health port": func(s *State) {
			a := s.Services["default/web"]
			a.HealthCheckNodePort = 1
			s.Services["default/web"] = a
		},
		"LB IP":        func(s *State) { s.Services["default/web"].LoadBalancerIPs[0] = "172.26.236.181" },
		"service gone": func(s *State) { delete(s.Services, "default/web") },
		"pod created":  func(s *State) { s.Created["Pod/default/a"] = at.Add(time.Hour) },
		"pool":         func(s *State) { s.Pools["p"] = nil },
	} {
		s := base()
		change(&s)
		if s.Equal(base()) || base().Equal(s) {
			t.Errorf("%s: a changed State is Equal to the original", name)
		}
	}
}

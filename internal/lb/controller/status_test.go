package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/model"
)

var servicesGR = schema.GroupResource{Resource: "services"}

func svcWith(rv string, ingress ...string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", UID: "u1", ResourceVersion: rv},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	for _, ip := range ingress {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func want(ips ...string) []corev1.LoadBalancerIngress {
	var out []corev1.LoadBalancerIngress
	for _, ip := range ips {
		out = append(out, corev1.LoadBalancerIngress{IP: ip})
	}
	return out
}

// TestWriteStatus drives writeStatus's conflict handling against a fake
// clientset whose status updates conflict a given number of times, after which
// the stored Service is replaced by "fresh" (as another writer would).
func TestWriteStatus(t *testing.T) {
	for _, tc := range []struct {
		name      string
		conflicts int   // status updates that conflict before one succeeds
		fail      error // every status update fails with it instead
		fresh     func(*corev1.Service)
		deleted   bool
		want      writeOutcome
		stored    []string // ingress stored at the end
		staleRVs  []string
	}{
		{name: "written", want: writeDone, stored: []string{"172.26.236.180"}, staleRVs: []string{"1"}},
		{name: "conflict, unrelated change: retried", conflicts: 1,
			fresh: func(s *corev1.Service) {
				s.ResourceVersion = "2"
				s.Status.Conditions = []metav1.Condition{{Type: "X"}}
			},
			want: writeDone, stored: []string{"172.26.236.180"}, staleRVs: []string{"1", "2"}},
		{name: "conflict, fresh already has it", conflicts: 1,
			fresh: func(s *corev1.Service) {
				s.ResourceVersion = "2"
				s.Status.LoadBalancer.Ingress = want("172.26.236.180")
			},
			want: writeAlreadyDone, stored: []string{"172.26.236.180"}, staleRVs: []string{"1", "2"}},
		{name: "conflict, spec changed: superseded", conflicts: 1,
			fresh: func(s *corev1.Service) { s.ResourceVersion = "2"; s.Spec.Ports[0].Port = 81 },
			want:  writeSuperseded, staleRVs: []string{"1", "2"}},
		{name: "conflict, another status: superseded", conflicts: 1,
			fresh: func(s *corev1.Service) {
				s.ResourceVersion = "2"
				s.Status.LoadBalancer.Ingress = want("172.26.236.199")
			},
			want: writeSuperseded, stored: []string{"172.26.236.199"}, staleRVs: []string{"1", "2"}},
		{name: "conflicts every time: bounded", conflicts: 100,
			fresh: func(s *corev1.Service) { s.ResourceVersion = "2" },
			want:  writeFailed},
		{name: "deleted", deleted: true, want: writeSuperseded},
		{name: "server error", fail: apierrors.NewInternalError(errors.New("etcd down")), want: writeFailed, staleRVs: []string{"1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planned := svcWith("1")
			client := fake.NewClientset()
			if !tc.deleted {
				if err := client.Tracker().Add(planned.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			updates := 0
			client.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" {
					return false, nil, nil
				}
				updates++
				if tc.fail != nil {
					return true, nil, tc.fail
				}
				if updates <= tc.conflicts {
					if updates == 1 && tc.fresh != nil {
						fresh := planned.DeepCopy()
						tc.fresh(fresh)
						if err := client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("services"), fresh, "ns1"); err != nil {
							t.Fatal(err)
						}
					}
					return true, nil, apierrors.NewConflict(servicesGR, "web", errors.New("changed"))
				}
				return false, nil, nil
			})
			c := &Controller{client: client, cfg: Config{FieldManager: "test"}}
			got, stale, err := c.writeStatus(context.Background(), planned, want("172.26.236.180"))
			if got != tc.want {
				t.Fatalf("outcome %d (err %v), want %d", got, err, tc.want)
			}
			if (err != nil) != (got == writeFailed) {
				t.Errorf("err %v with outcome %d", err, got)
			}
			if tc.want == writeFailed && tc.conflicts > 0 && updates != maxConflictRetries+1 {
				t.Errorf("%d status updates, want %d", updates, maxConflictRetries+1)
			}
			if tc.staleRVs != nil && !slices.Equal(stale, tc.staleRVs) {
				t.Errorf("stale resourceVersions %v, want %v", stale, tc.staleRVs)
			}
			if tc.deleted {
				return
			}
			stored, err := client.CoreV1().Services("ns1").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ips(stored), tc.stored) {
				t.Errorf("stored ingress %v, want %v", ips(stored), tc.stored)
			}
		})
	}
}

// TestOverlay: a written status stands in for the cached one while the cache
// holds a resourceVersion from before the write, and is forgotten once the
// cache moves on or the Service is gone.
func TestOverlay(t *testing.T) {
	st := newSyncState(nil)
	key := keyOf(svcWith("1"))
	st.written[key] = pendingWrite{staleRVs: []string{"1", "2"}, ingress: want("172.26.236.180")}

	seen := map[model.ServiceKey]bool{}
	cached := svcWith("2")
	got := st.overlay(seen)(cached)
	if !plan.EqualIngress(got.Status.LoadBalancer.Ingress, want("172.26.236.180")) || got == cached {
		t.Errorf("stale cache: got ingress %v (copy: %v), want the written one on a copy", ips(got), got != cached)
	}
	if len(cached.Status.LoadBalancer.Ingress) != 0 {
		t.Error("overlay modified the cached object")
	}
	if !seen[key] {
		t.Error("overlay did not mark the Service seen")
	}
	fresh := svcWith("3", "172.26.236.180")
	if got := st.overlay(seen)(fresh); got != fresh {
		t.Error("cache past the write: overlay still applied")
	}
	if _, ok := st.written[key]; ok {
		t.Error("cache past the write: pending write not forgotten")
	}
}

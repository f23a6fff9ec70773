package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

func fakeLBService(name string, created int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, created, 0, 0, time.UTC))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

// TestSyncFailedWriteBacksOff runs the controller over fake clients where every
// status write of ns1/bad fails: ns1/good still gets its address, ns1/bad's
// writes are retried with growing gaps, and a change to ns1/bad retries it at
// once. It runs in a synctest bubble, where the backoff's seconds pass as
// soon as every goroutine waits.
func TestSyncFailedWriteBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(fakeLBService("bad", 1), fakeLBService("good", 2))
		var mu sync.Mutex
		var badWrites []time.Time
		client.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
			u, ok := a.(k8stesting.UpdateAction)
			if !ok || a.GetSubresource() != "status" || u.GetObject().(*corev1.Service).Name != "bad" {
				return false, nil, nil
			}
			mu.Lock()
			badWrites = append(badWrites, time.Now())
			mu.Unlock()
			return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
		})
		poolObj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": pool.SchemeGroupVersion.String(), "kind": pool.Kind,
			"metadata": map[string]any{"name": "lab"},
			"spec":     map[string]any{"addresses": []any{"172.26.236.180-172.26.236.199"}},
		}}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{poolGVR: pool.Kind + "List"}, poolObj)
		c, err := New(client, dyn, Config{Plan: plan.Config{IsDefault: true}})
		if err != nil {
			t.Fatal(err)
		}
		start(t, c.Run)

		get := func(name string) *corev1.Service {
			s, err := client.CoreV1().Services("ns1").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		kubetest.Eventually(t, 10*time.Second, "good gets .181 (bad, older, is planned .180)", func() (bool, string) {
			got := ips(get("good"))
			return slices.Equal(got, []string{"172.26.236.181"}), fmt.Sprint(got)
		})
		writes := func() []time.Time {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(badWrites)
		}
		kubetest.Eventually(t, 10*time.Second, "three failed writes of bad", func() (bool, string) {
			return len(writes()) >= 3, fmt.Sprint(len(writes()))
		})
		w := writes()
		gap1, gap2 := w[1].Sub(w[0]), w[2].Sub(w[1])
		if gap1 < backoffBase-coalesce || gap2 < 2*backoffBase-coalesce {
			t.Errorf("gaps between failed writes %v, %v: want at least %v, %v (backoff)", gap1, gap2, backoffBase, 2*backoffBase)
		}

		// A change to bad retries it without waiting out the backoff (now 4s).
		time.Sleep(200 * time.Millisecond)
		n := len(writes())
		changed := time.Now()
		s := get("bad")
		s.Labels = map[string]string{"touched": "yes"}
		if _, err := client.CoreV1().Services("ns1").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, 2*time.Second, "a write of bad right after it changed", func() (bool, string) {
			w := writes()
			return len(w) > n && w[n].Sub(changed) < time.Second, fmt.Sprint(len(w))
		})
		if got := ips(get("bad")); len(got) != 0 {
			t.Errorf("bad has ingress %v though every write failed", got)
		}
	})
}

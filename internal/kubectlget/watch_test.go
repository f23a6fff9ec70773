package kubectlget

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/logtest"
)

// TestWatch: the table first, then a row for each Service added, changed
// or deleted between reads, none for what stayed; the end of ctx ends it.
func TestWatch(t *testing.T) {
	states := []*controlplane.Result{result()}
	next := result()
	next.Services = next.Services[1:] // web deleted
	next.Services = append(next.Services, &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "new"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.50", Type: corev1.ServiceTypeClusterIP}})
	changed := result()
	changed.Services[1].Spec.ClusterIP = "10.96.0.31" // db changed
	states = append(states, next, next, changed)
	var mu sync.Mutex
	reads := 0
	fetch := func(context.Context) (*controlplane.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		r := states[min(reads, len(states)-1)]
		reads++
		return r, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out logtest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, &out, &out, fetch, []string{"svc"}, Options{Output: "name"}, time.Millisecond)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := reads
		mu.Unlock()
		if n >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// First read: db, web. Second: new added, web deleted. Third: no
	// change. Fourth: db changed, web back, new gone.
	want := "service/db\nservice/web\nservice/new\nservice/web\nservice/db\nservice/web\nservice/new\n"
	if got := out.String(); !strings.HasPrefix(got, want) {
		t.Errorf("watch printed:\n%s\nwant it to begin:\n%s", got, want)
	}
}

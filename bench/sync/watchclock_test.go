package syncbench

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// Kube tier: against a real kube-apiserver the clock times the ADDED event of
// a Service created after it started, between the Create call's start and a
// bound after it; a Service that existed before is never reported; Close ends
// the watch without an error.
func TestWatchClock(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	kubetest.CreateNamespace(t, env.Client, benchNamespace)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svcs := env.Client.CoreV1().Services(benchNamespace)
	if _, err := svcs.Create(ctx, NewService(benchNamespace, "before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wc, err := StartWatchClock(ctx, env.Client, benchNamespace)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	t0 := time.Now()
	if _, err := svcs.Create(ctx, NewService(benchNamespace, "after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	at, ok := wc.Seen(ctx, "after", 10*time.Second)
	if !ok {
		t.Fatal("the ADDED event of Service after was not seen within 10s")
	}
	if at.Before(t0) || at.Sub(t0) > 10*time.Second {
		t.Errorf("seen at %v, %v after the Create began: want within [0, 10s]", at, at.Sub(t0))
	}
	if _, ok := wc.Seen(ctx, "before", 200*time.Millisecond); ok {
		t.Error("a Service that existed before the clock started was reported")
	}
	if err := wc.Err(); err != nil {
		t.Errorf("Err while running = %v", err)
	}
}

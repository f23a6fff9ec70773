package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

func TestOneNode(t *testing.T) {
	nodetest.RequireTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := nodetest.Up(t, ctx, nodecluster.Options{
		Nodes:     1,
		CNIPlugin: svcnetBin(t),
		Images:    []string{pauseImage(t)},
	})
	if uses, err := c.Memory(); err == nil {
		t.Logf("memory:\n%s", nodecluster.FormatMemory(uses))
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: nodecluster.DefaultPauseImage, ImagePullPolicy: corev1.PullIfNotPresent,
		}}},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			t.Logf("pod running on %s with IP %s", p.Spec.NodeName, p.Status.PodIP)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not running: %+v %v", p.Status, err)
		}
		time.Sleep(time.Second)
	}
	if uses, err := c.Memory(); err == nil {
		t.Logf("memory:\n%s", nodecluster.FormatMemory(uses))
	}
}

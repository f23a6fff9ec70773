package eventlog

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Cluster returns a recorder of Events from source written to the cluster
// of client (core/v1), through client-go's broadcaster, which writes them
// asynchronously and aggregates repeats, as every Kubernetes component
// records its Events; stop flushes and ends it.
func Cluster(ctx context.Context, client kubernetes.Interface, source corev1.EventSource) (r record.EventRecorder, stop func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, source), b.Shutdown
}

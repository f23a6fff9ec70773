package printers

import (
	"bytes"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventsTable(t *testing.T) {
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	events := []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lb.17f"},
			InvolvedObject: corev1.ObjectReference{Kind: "Service", Name: "lb"}, Type: "Normal", Reason: "IPAllocated",
			Message: "Assigned IP 172.26.236.180 from pool lab\n", Count: 3, FirstTimestamp: at(2 * time.Hour), LastTimestamp: at(90 * time.Second),
			Source: corev1.EventSource{Component: "svcnet-lb-controller"}},
		// A new-API event: no count, first seen at eventTime, a series.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1.18a"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1", FieldPath: "spec.containers{web}"}, Type: "Warning",
			Reason: "BackOff", Message: "Back-off restarting", EventTime: metav1.NewMicroTime(now.Add(-10 * time.Minute)),
			Series:              &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(now.Add(-5 * time.Second))},
			ReportingController: "kubelet", ReportingInstance: "node1"},
		// No name in the reference, no times at all.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x.1"}, InvolvedObject: corev1.ObjectReference{Kind: "Node"},
			Type: "Normal", Reason: "Starting", Source: corev1.EventSource{Component: "svcnet-proxy", Host: "node2"}},
	}
	var b bytes.Buffer
	if err := Events(&b, events, Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	want := `LAST SEEN   TYPE      REASON        OBJECT       MESSAGE
90s         Normal    IPAllocated   service/lb   Assigned IP 172.26.236.180 from pool lab
5s          Warning   BackOff       pod/web-1    Back-off restarting
<unknown>   Normal    Starting      node         
`
	if b.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", b.String(), want)
	}
	b.Reset()
	if err := Events(&b, events, Options{Now: now, Wide: true, AllNamespaces: true}); err != nil {
		t.Fatal(err)
	}
	want = `NAMESPACE   LAST SEEN   TYPE      REASON        OBJECT       SUBOBJECT              SOURCE                 MESSAGE                                    FIRST SEEN   COUNT   NAME
default     90s         Normal    IPAllocated   service/lb                          svcnet-lb-controller   Assigned IP 172.26.236.180 from pool lab   120m         3       lb.17f
default     5s          Warning   BackOff       pod/web-1    spec.containers{web}   kubelet, node1         Back-off restarting                        10m          4       web-1.18a
other       <unknown>   Normal    Starting      node                                svcnet-proxy, node2                                               <unknown>    1       x.1
`
	if b.String() != want {
		t.Errorf("wide, got:\n%s\nwant:\n%s", b.String(), want)
	}
}

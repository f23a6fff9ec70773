package proxy_test

import (
	"errors"
	"syscall"
	"testing"
)

// TestDeadEndpointUnderLoad: an endpoint's pod stops serving (its server
// gone, nothing listening: a connect to it is refused) while the
// EndpointSlice still lists it, as before the endpoints catch up; a
// bounded client loop through the ClusterIP then runs. On a plane that
// retries (planeRetries) no request fails and the live pod answers all;
// on the others the requests sent to the dead pod fail at once (refused by
// the pod, or reset by a proxy that could not reach it) and the rest reach
// the live one.
func TestDeadEndpointUnderLoad(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	client := c.addPod("client", 20)
	svc := newService("web", []string{"10.96.0.155"}, tcpPort(80))
	c.apply(svc, v4(svc, local(a), local(b)))
	c.startProxy()
	const addr = "10.96.0.155:80"
	eventuallyAnswered(t, client.ns, "tcp", addr, a.name)
	eventuallyAnswered(t, client.ns, "tcp", addr, b.name)

	b.echo.close()
	const total = 40
	answered, failed := map[string]int{}, 0
	for i := range total {
		r, err := tcpReq(client.ns, addr, reqTimeout)
		switch got := outcome(err); {
		case got == "ok":
			answered[r.Pod]++
		case got == "refused", errors.Is(err, syscall.ECONNRESET):
			failed++
		default:
			t.Fatalf("request %d: %s (%v), want answered, refused or reset", i+1, got, err)
		}
	}
	t.Logf("%d requests with pod-b dead: answered %v, %d failed", total, answered, failed)
	if answered[a.name]+failed != total {
		t.Errorf("answered %v and %d failed, want every other request answered by %s", answered, failed, a.name)
	}
	switch {
	case planeRetries() && failed > 0:
		t.Errorf("%d of %d requests failed: the proxy did not retry the live endpoint", failed, total)
	case !planeRetries() && failed == 0:
		// Each request picks pod-b with probability 1/2: 2^-40 of missing it.
		t.Errorf("no request failed: the dead endpoint was never chosen, or the plane retried")
	}
}

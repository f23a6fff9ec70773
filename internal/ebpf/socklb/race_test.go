package socklb

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
)

// Connects while the Service's backends change as fast as SetService goes,
// with a Reap after every 50 changes: each connect reaches a backend of one of
// the sets, reports the frontend, and none fails.
func TestSetServiceUnderConnects(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	h.serveTCP(t, be2, "be2")
	sets := [2][]netip.AddrPort{{mustAP(be1)}, {mustAP(be2)}}
	if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, sets[0]); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	flips := make(chan int, 1)
	errc := make(chan error, 1)
	go func() {
		i := 0
		defer func() { flips <- i }()
		for ; i < 1_000_000; i++ { // bounded; stop ends it far sooner
			select {
			case <-stop:
				return
			default:
			}
			if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, sets[i%2]); err != nil {
				errc <- err
				return
			}
			if i%50 == 49 {
				if err := h.lb.Reap(); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	as := h.dial(t, "tcp", vip, 400)
	close(stop)
	n := <-flips
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	seen := map[string]int{}
	for i, a := range as {
		if a.Errno != "" || a.Err != "" || !a.Echo || a.Peer != vip {
			t.Errorf("connect %d during changes: %+v, want an echo from a backend and peer %s", i, a, vip)
		}
		seen[a.Server]++
	}
	t.Logf("%d connects during %d changes: %v", len(as), n, seen)
	if n < 10 {
		t.Errorf("only %d changes during the connects, want the connects to race many", n)
	}
	if err := h.lb.Reap(); err != nil {
		t.Fatal(err)
	}
	if n := backendSlots(t, h.lb); n != 1 {
		t.Errorf("backend slots after Reap: %d, want 1", n)
	}
}

package tclb

import (
	"errors"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
)

// TestView: another reader finds the programs on the interface (tcx and
// clsact) and reads the frontend and the connection a request made.
func TestView(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			h := newHarness(t)
			serve(t, h.remote, "remote", beNode)
			err := h.node.Do(func() error {
				_, err := OpenAttached(h.ifindexes[0])
				if !errors.Is(err, ErrNotAttached) {
					t.Errorf("before attach: OpenAttached = %v, want ErrNotAttached", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			lb := h.open(t, mode.m)
			front := ap(nodeIP4, nodePort)
			bes := []Backend{{ap(remoteIP4, beNode), false}}
			if err := lb.SetService(front, model.ProtocolTCP, bes, Policy{}); err != nil {
				t.Fatal(err)
			}
			a, err := ask(h.client, "tcp", front.String(), 40100)
			if err != nil {
				t.Fatal(err)
			}
			err = h.node.Do(func() error {
				v, err := OpenAttached(h.ifindexes[0])
				if err != nil {
					return err
				}
				defer v.Close()
				got, pol, ok, err := v.Service(front, model.ProtocolTCP)
				if err != nil || !ok || pol.Local || len(got) != 1 || got[0] != bes[0] {
					t.Errorf("Service(%v) = %v, %+v, %v, %v; want %v, Cluster", front, got, pol, ok, err, bes)
				}
				if _, _, ok, err := v.Service(ap(nodeIP4, nodePort+1), model.ProtocolTCP); ok || err != nil {
					t.Errorf("Service(another port) = ok %v, %v; want none", ok, err)
				}
				c, ok, err := v.Conn(ap(clientIP4, 40100), front, model.ProtocolTCP)
				if err != nil || !ok || c.Backend != bes[0].AddrPort || c.SNAT != a.Peer || c.State != "CLOSING" {
					t.Errorf("Conn = %+v, %v, %v; want to %v from %v, CLOSING", c, ok, err, bes[0].AddrPort, a.Peer)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

package tclb

import (
	"errors"
	"net/netip"
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
				if _, ok, err := v.MaglevSlot(front, model.ProtocolTCP, 0); ok || err != nil {
					t.Errorf("MaglevSlot of a frontend choosing at random = ok %v, %v; want none", ok, err)
				}
				// Under Maglev, each slot reads as the table the
				// programs were given.
				mag := ap(nodeIP4, nodePort+2)
				mbes := []Backend{{ap(remoteIP4, beNode), false}, {ap(remoteIP4, beNode+1), false}, {ap(remoteIP4, beNode+2), false}}
				if err := lb.SetService(mag, model.ProtocolTCP, mbes, Policy{Maglev: true}); err != nil {
					return err
				}
				table, err := NewMaglevTable([]netip.AddrPort{mbes[0].AddrPort, mbes[1].AddrPort, mbes[2].AddrPort})
				if err != nil {
					return err
				}
				for _, slot := range []uint32{0, 1, 4242, MaglevSize - 1} {
					got, ok, err := v.MaglevSlot(mag, model.ProtocolTCP, slot)
					if want := mbes[table[slot]].AddrPort; err != nil || !ok || got != want {
						t.Errorf("MaglevSlot(%v, slot %d) = %v, %v, %v; want %v", mag, slot, got, ok, err, want)
					}
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

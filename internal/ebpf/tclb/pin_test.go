package tclb

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
	"golang.org/x/sys/unix"
)

// serveLines answers every line on each connection to port in ns with the
// same line, until the test ends.
func serveLines(t *testing.T, ns *netns.NS, port int) {
	t.Helper()
	acceptLoop(t, ns, port, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			fmt.Fprint(c, l)
		}
	})
}

// TestPinnedAdopt: a pinned load balancer closed (its process gone) keeps
// translating, and the next one adopts its maps and links: connections
// made before, to a remote (SNAT) and a local backend, carry on through both
// the gap and the new programs; it holds what the first held; Unpin
// detaches it all.
func TestPinnedAdopt(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			h := newHarness(t)
			serveLines(t, h.pod, 9000)
			serveLines(t, h.remote, 9000)
			dir := cgrouptest.BPFFS(t) + "/tclb"
			cfg := Config{SNAT: []netip.Addr{netip.MustParseAddr(nodeIP4)}, MasqueradeMark: 0x4000}
			openIn := func() *LB {
				var lb *LB
				if err := h.node.Do(func() error {
					var err error
					lb, err = OpenPinned(cfg, mode.m, dir, h.ifindexes...)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return lb
			}
			lb := openIn()
			remote, local := ap(nodeIP4, 30001), ap(nodeIP4, 30002)
			if err := lb.SetService(remote, model.ProtocolTCP, []Backend{{ap(remoteIP4, 9000), false}}, Policy{}); err != nil {
				t.Fatal(err)
			}
			if err := lb.SetService(local, model.ProtocolTCP, []Backend{{ap(podIP4, 9000), true}}, Policy{Local: true}); err != nil {
				t.Fatal(err)
			}
			var conns []*bufio.ReadWriter
			for _, fe := range []netip.AddrPort{remote, local} {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				c, err := netns.Dialer(h.client)(ctx, "tcp", fe.String())
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				c.SetDeadline(time.Now().Add(15 * time.Second))
				conns = append(conns, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)))
			}
			echo := func(when string) {
				t.Helper()
				for i, rw := range conns {
					fmt.Fprintf(rw, "%s %d\n", when, i)
					rw.Flush()
					if l, err := rw.ReadString('\n'); err != nil || l != fmt.Sprintf("%s %d\n", when, i) {
						t.Fatalf("%s, connection %d: %q, %v", when, i, l, err)
					}
				}
			}
			echo("before")
			if err := lb.Close(); err != nil {
				t.Fatal(err)
			}
			echo("in-between")
			lb2 := openIn()
			defer lb2.Close()
			held, err := lb2.Held()
			if err != nil || len(held) != 2 || held[0].Frontend != remote || held[1].Frontend != local || !held[1].Policy.Local ||
				held[0].Backends[0] != (Backend{ap(remoteIP4, 9000), false}) {
				t.Errorf("adopted: Held = %+v, %v; want both frontends as set", held, err)
			}
			echo("after")
			if err := lb2.Close(); err != nil {
				t.Fatal(err)
			}
			if err := h.node.Do(func() error { return Unpin(dir) }); err != nil {
				t.Fatal(err)
			}
			// A pinned tcx link goes an RCU grace period after its pin.
			var attached error
			for try := 0; try < 50; try++ {
				attached = h.node.Do(func() error {
					for _, i := range h.ifindexes {
						if v, err := OpenAttached(i); err == nil {
							v.Close()
							return fmt.Errorf("interface %d: still attached after Unpin", i)
						}
					}
					return nil
				})
				if attached == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if attached != nil {
				t.Error(attached)
			}
		})
	}
}

// TestUnmountDetaches: a pinned load balancer whose process is gone is
// detached when its BPF filesystem is unmounted (the lab's proxy swap).
func TestUnmountDetaches(t *testing.T) {
	h := newHarness(t)
	dir, err := os.MkdirTemp("", "svcnet-bpffs-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatal(err)
	}
	mounted := true
	defer func() {
		if mounted {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	}()
	err = h.node.Do(func() error {
		lb, err := OpenPinned(Config{}, TCX, dir+"/tclb", h.ifindexes...)
		if err != nil {
			return err
		}
		return lb.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	attached := func() bool {
		var ok bool
		h.node.Do(func() error {
			v, err := OpenAttached(h.ifindexes[0])
			if err == nil {
				ok = true
				v.Close()
			}
			return nil
		})
		return ok
	}
	if !attached() {
		t.Fatal("pinned and closed: not attached, want attached")
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	mounted = false
	for try := 0; attached(); try++ {
		if try == 100 {
			t.Fatal("still attached 1 s after the BPF filesystem was unmounted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

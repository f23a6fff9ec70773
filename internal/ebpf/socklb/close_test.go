package socklb

import (
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/model"
)

var attachTypes = []ebpf.AttachType{
	ebpf.AttachCGroupInet4Connect, ebpf.AttachCgroupInet4GetPeername,
	ebpf.AttachCGroupInet6Connect, ebpf.AttachCgroupInet6GetPeername,
}

// attached counts the programs attached to the cgroup at each hook.
func attached(t *testing.T, cgfd int) int {
	t.Helper()
	n := 0
	for _, a := range attachTypes {
		r, err := link.QueryPrograms(link.QueryOptions{Target: cgfd, Attach: a})
		if err != nil {
			t.Fatalf("query %v: %v", a, err)
		}
		n += len(r.Programs)
	}
	return n
}

// Close detaches every program from the cgroup and the kernel frees the
// programs and maps; the cgroup's connects are plain again.
func TestCloseRemovesEverything(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, []netip.AddrPort{mustAP(be1)}); err != nil {
		t.Fatal(err)
	}
	if a := h.dial(t, "tcp", vip, 1)[0]; a.Server != "be1" {
		t.Fatalf("connect before Close: %+v, want be1", a)
	}
	if n := attached(t, h.cgfd); n != len(attachTypes) {
		t.Fatalf("programs attached to the cgroup: %d, want %d", n, len(attachTypes))
	}
	var mapIDs []ebpf.MapID
	for _, m := range []*ebpf.Map{h.lb.objs.Services, h.lb.objs.Backends, h.lb.objs.Revnat} {
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, ok := info.ID()
		if !ok {
			t.Fatal("map info without an ID")
		}
		mapIDs = append(mapIDs, id)
	}

	if err := h.lb.Close(); err != nil {
		t.Fatal(err)
	}
	if n := attached(t, h.cgfd); n != 0 {
		t.Errorf("programs attached to the cgroup after Close: %d, want 0", n)
	}
	if a := h.dial(t, "tcp", vip, 1)[0]; a.Errno != "ENETUNREACH" {
		t.Errorf("connect after Close: %+v, want ENETUNREACH (untranslated)", a)
	}
	// The kernel frees the maps after their last reference, asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for _, id := range mapIDs {
		for {
			m, err := ebpf.NewMapFromID(id)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err == nil {
				m.Close()
			}
			if time.Now().After(deadline) {
				t.Errorf("map %d still exists 5 s after Close (err %v)", id, err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, nil); err == nil {
		t.Error("SetService after Close: no error")
	}
	if err := h.lb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Open of a directory that is no cgroup fails and leaves nothing loaded.
func TestOpenNotACgroup(t *testing.T) {
	cgrouptest.New(t) // root and cgroup2 present, as for the other tests
	if lb, err := Open(t.TempDir()); err == nil {
		lb.Close()
		t.Fatal("Open of a plain directory: no error")
	}
}

package socklb

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
)

// marshal is what cilium/ebpf writes into a map for v: its bytes in the
// host's order.
func marshal(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := binary.Write(&b, binary.NativeEndian, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestServiceKeyBytes(t *testing.T) {
	key := serviceKey(netip.MustParseAddrPort("10.96.0.10:80"), bpfaddr.ProtoTCP)
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 96, 0, 10, // ::ffff:10.96.0.10
		0, 80, // port, network order
		6, 0, // protocol, pad
	}
	if got := marshal(t, key); !bytes.Equal(got, want) {
		t.Errorf("service key bytes\n got %x\nwant %x", got, want)
	}
}

func TestServiceKeyBytesIPv6(t *testing.T) {
	key := serviceKey(netip.MustParseAddrPort("[fd00:96::a]:443"), bpfaddr.ProtoUDP)
	want := []byte{
		0xfd, 0, 0, 0x96, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a,
		0x01, 0xbb, // 443
		17, 0,
	}
	if got := marshal(t, key); !bytes.Equal(got, want) {
		t.Errorf("service key bytes\n got %x\nwant %x", got, want)
	}
}

func TestBackendBytes(t *testing.T) {
	v := backendValue(netip.MustParseAddrPort("192.168.1.7:8080"))
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 7,
		0x1f, 0x90, // 8080, network order
		0, 0,
	}
	if got := marshal(t, v); !bytes.Equal(got, want) {
		t.Errorf("backend bytes\n got %x\nwant %x", got, want)
	}
}

// The Go types bpf2go generated match the maps of the embedded object, so a
// change to bpf/socklb.c that is not regenerated shows here.
func TestMapLayouts(t *testing.T) {
	spec, err := loadSocklb()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name       string
		key, value any
	}{
		{"services", socklbSvcKey{}, socklbSvcValue{}},
		{"backends", uint32(0), socklbBackend{}},
		{"revnat", uint64(0), socklbRevnatValue{}},
	} {
		ms, ok := spec.Maps[m.name]
		if !ok {
			t.Errorf("map %s: not in the object", m.name)
			continue
		}
		if k, v := binary.Size(m.key), binary.Size(m.value); int(ms.KeySize) != k || int(ms.ValueSize) != v {
			t.Errorf("map %s: key/value size %d/%d in the object, %d/%d in Go", m.name, ms.KeySize, ms.ValueSize, k, v)
		}
	}
	for _, p := range []string{"socklb_connect4", "socklb_getpeername4", "socklb_connect6", "socklb_getpeername6"} {
		if _, ok := spec.Programs[p]; !ok {
			t.Errorf("program %s: not in the object", p)
		}
	}
}

func TestSlotsAllocFree(t *testing.T) {
	var s slots
	a, _ := s.alloc(3)
	b, _ := s.alloc(2)
	if a != 0 || b != 3 {
		t.Fatalf("alloc 3, 2 = %d, %d; want 0, 3", a, b)
	}
	if _, err := s.alloc(0); err == nil {
		t.Error("alloc(0): no error")
	}
	// Near the top of the space the cursor wraps and skips live ranges.
	s.next = math.MaxUint32 - 1
	c, err := s.alloc(4)
	if err != nil || c != 5 {
		t.Fatalf("alloc(4) at the top = %d, %v; want 5 (after the live 0..4)", c, err)
	}
	s.free(a)
	s.next = math.MaxUint32
	d, err := s.alloc(3)
	if err != nil || d != 0 {
		t.Fatalf("alloc(3) after freeing 0..2 = %d, %v; want 0", d, err)
	}
}

// Random allocations and frees never hand out overlapping ranges.
func TestSlotsNeverOverlap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s slots
	s.next = math.MaxUint32 - 1000 // wrap during the run
	used := map[uint32]uint32{}    // slot -> base
	for range 5000 {
		if len(used) > 0 && r.IntN(3) == 0 {
			for _, base := range used {
				n := s.live[base]
				s.free(base)
				for i := range n {
					delete(used, base+i)
				}
				break
			}
			continue
		}
		n := uint32(1 + r.IntN(40))
		base, err := s.alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if other, ok := used[base+i]; ok {
				t.Fatalf("alloc(%d) = %d: slot %d already in the range at %d", n, base, base+i, other)
			}
			used[base+i] = base
		}
	}
}

// backendAddrPort decodes what backendValue encodes, an IPv4 backend as IPv4.
func TestBackendRoundTrip(t *testing.T) {
	for _, s := range []string{"192.168.1.7:8080", "[fd00:192:168:1::7]:8080", "10.0.0.1:1", "[::1]:65535"} {
		be := netip.MustParseAddrPort(s)
		if got := backendAddrPort(backendValue(be)); got != be {
			t.Errorf("backendAddrPort(backendValue(%v)) = %v", be, got)
		}
	}
}

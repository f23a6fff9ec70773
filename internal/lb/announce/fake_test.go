package announce

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFake(t *testing.T) {
	eq := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	var f Fake
	if got := f.Owned(); len(got) != 0 {
		t.Fatalf("zero Fake owns %v", got)
	}
	if err := f.SetOwned(addrs("172.26.236.181", "fd00:26:236::b4", "172.26.236.180", "172.26.236.180")); err != nil {
		t.Fatal(err)
	}
	if err := f.SetOwned(addrs("172.26.236.180", "::ffff:172.26.236.182", "0.0.0.0")); !errors.Is(err, ErrInvalidIP) {
		t.Fatalf("invalid IP: error %v, want ErrInvalidIP", err)
	}
	if d := cmp.Diff(addrs("172.26.236.180", "172.26.236.182"), f.Owned(), eq); d != "" {
		t.Errorf("owned (-want +got):\n%s", d)
	}
	refused := errors.New("multicast join failed")
	f.Refuse(netip.MustParseAddr("fd00:26:236::b5"), refused)
	if err := f.SetOwned(addrs("172.26.236.180", "fd00:26:236::b5", "fd00:26:236::b4")); !errors.Is(err, refused) {
		t.Fatalf("refused IP: error %v, want %v", err, refused)
	}
	if d := cmp.Diff(addrs("172.26.236.180", "fd00:26:236::b4"), f.Owned(), eq); d != "" {
		t.Errorf("owned after a refusal (-want +got):\n%s", d)
	}
	f.Refuse(netip.MustParseAddr("fd00:26:236::b5"), nil)
	if err := f.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	if got := f.Owned(); len(got) != 0 {
		t.Errorf("owned after SetOwned(nil): %v", got)
	}
	// One announcement each time an IP became owned, in order; b4 twice.
	want := addrs("172.26.236.180", "172.26.236.181", "fd00:26:236::b4", "172.26.236.182", "fd00:26:236::b4")
	if d := cmp.Diff(want, f.Announced(), eq); d != "" {
		t.Errorf("announcements (-want +got):\n%s", d)
	}
}

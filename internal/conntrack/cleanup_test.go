package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
)

func TestCleanup(t *testing.T) {
	keepTCP := withProto(udp("192.168.1.2:40001", "10.96.0.10:53", "192.168.1.4:5353"), ProtoTCP)
	keep4 := udp("192.168.1.2:40002", "10.96.0.10:53", "192.168.1.5:5353")
	keep6 := udp("[fd00:192:168:1::2]:40003", "[fd00:96::a]:53", "[fd00:192:168:1::5]:5353")
	keepOther := udp("192.168.1.2:40004", "8.8.8.8:53", "8.8.8.8:53")
	keepNoEps := udp("192.168.1.2:40005", "10.96.0.50:53", "10.96.0.50:53")
	stale4 := udp("192.168.1.2:40006", "10.96.0.10:53", "192.168.1.4:5353")
	stale4NP := udp("172.26.236.10:40007", "172.26.236.177:30053", "192.168.9.9:5353")
	stale6 := udp("[fd00:192:168:1::2]:40008", "[fd00:96::a]:53", "[fd00:192:168:1::4]:5353")
	staleSCTP := withProto(udp("192.168.1.2:40009", "10.96.0.30:3868", "192.168.1.1:3868"), ProtoSCTP)
	stale4.ID = 7

	fake := NewFake(keepTCP, keep4, keep6, keepOther, keepNoEps, stale4, stale4NP, stale6, staleSCTP)
	n, err := Cleanup(context.Background(), fake, testWant())
	if err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if n != 4 {
		t.Errorf("Cleanup deleted %d flows, want 4", n)
	}
	want := NewFake(keepTCP, keep4, keep6, keepOther, keepNoEps).Flows()
	if diff := cmp.Diff(want, fake.Flows(), flowEqual); diff != "" {
		t.Errorf("flows after Cleanup (-want +got):\n%s", diff)
	}

	// Idempotent: a second run finds nothing.
	if n, err := Cleanup(context.Background(), fake, testWant()); n != 0 || err != nil {
		t.Errorf("second Cleanup = %d, %v; want 0, nil", n, err)
	}
}

func TestCleanupReplacedFlowSurvives(t *testing.T) {
	// The table changes between List and Delete: the stale entry expired and
	// the client's next packet created a new one with the same tuple (new
	// ID). Delete must not remove the new entry.
	stale := udp("192.168.1.2:40000", "10.96.0.10:53", "192.168.1.4:5353")
	stale.ID = 1
	fake := NewFake(stale)
	flows, err := fake.List(ipfamily.IPv4)
	if err != nil || len(flows) != 1 {
		t.Fatalf("List = %v, %v", flows, err)
	}
	fresh := udp("192.168.1.2:40000", "10.96.0.10:53", "192.168.2.7:5353")
	fresh.ID = 2
	fake.Add(fresh)
	if n, err := fake.Delete(ipfamily.IPv4, flows); n != 0 || err != nil {
		t.Errorf("Delete of replaced flow = %d, %v; want 0, nil", n, err)
	}
	if diff := cmp.Diff([]Flow{fresh}, fake.Flows(), flowEqual); diff != "" {
		t.Errorf("flows (-want +got):\n%s", diff)
	}
}

func TestCleanupErrors(t *testing.T) {
	stale4 := udp("192.168.1.2:40006", "10.96.0.10:53", "192.168.1.4:5353")
	stale6 := udp("[fd00:192:168:1::2]:40008", "[fd00:96::a]:53", "[fd00:192:168:1::4]:5353")
	boom := errors.New("boom")

	t.Run("list error in one family, the other is cleaned", func(t *testing.T) {
		fake := NewFake(stale4, stale6)
		fake.ListErr = map[ipfamily.Family]error{ipfamily.IPv4: boom}
		n, err := Cleanup(context.Background(), fake, testWant())
		if n != 1 || !errors.Is(err, boom) {
			t.Errorf("Cleanup = %d, %v; want 1, boom", n, err)
		}
		if diff := cmp.Diff([]Flow{stale4}, fake.Flows(), flowEqual); diff != "" {
			t.Errorf("flows (-want +got):\n%s", diff)
		}
	})
	t.Run("partial list is used", func(t *testing.T) {
		fake := NewFake(stale4)
		fake.ListErr = map[ipfamily.Family]error{ipfamily.IPv4: fmt.Errorf("dump: %w", ErrPartial)}
		if n, err := Cleanup(context.Background(), fake, testWant()); n != 1 || err != nil {
			t.Errorf("Cleanup = %d, %v; want 1, nil", n, err)
		}
	})
	t.Run("delete error is reported", func(t *testing.T) {
		fake := NewFake(stale4, stale6)
		fake.DeleteErr = map[ipfamily.Family]error{ipfamily.IPv6: boom}
		n, err := Cleanup(context.Background(), fake, testWant())
		if n != 1 || !errors.Is(err, boom) {
			t.Errorf("Cleanup = %d, %v; want 1, boom", n, err)
		}
		if diff := cmp.Diff([]Flow{stale6}, fake.Flows(), flowEqual); diff != "" {
			t.Errorf("flows (-want +got):\n%s", diff)
		}
	})
	t.Run("families without endpoints are not listed", func(t *testing.T) {
		fake := NewFake(stale4)
		fake.ListErr = map[ipfamily.Family]error{ipfamily.IPv6: boom}
		w := Want{}
		w.Add(Frontend{ProtoUDP, addr("10.96.0.10"), 53}, ap("192.168.1.5:5353"))
		if n, err := Cleanup(context.Background(), fake, w); n != 1 || err != nil {
			t.Errorf("Cleanup = %d, %v; want 1, nil", n, err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		fake := NewFake(stale4, stale6)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n, err := Cleanup(ctx, fake, testWant())
		if n != 0 || !errors.Is(err, context.Canceled) {
			t.Errorf("Cleanup = %d, %v; want 0, context.Canceled", n, err)
		}
		if len(fake.Flows()) != 2 {
			t.Errorf("cancelled Cleanup changed the table: %v", fake.Flows())
		}
	})
	t.Run("empty want touches nothing", func(t *testing.T) {
		fake := NewFake(stale4, stale6)
		fake.ListErr = map[ipfamily.Family]error{ipfamily.IPv4: boom, ipfamily.IPv6: boom}
		if n, err := Cleanup(context.Background(), fake, Want{}); n != 0 || err != nil {
			t.Errorf("Cleanup = %d, %v; want 0, nil", n, err)
		}
	})
}

func TestCleanupManyFlows(t *testing.T) {
	// More stale flows than one delete batch.
	var flows []Flow
	for i := range 3*deleteBatch + 5 {
		f := udp("192.168.1.2:1", "10.96.0.10:53", "192.168.1.4:5353")
		f.OrigSrc = netip.AddrPortFrom(f.OrigSrc.Addr(), uint16(1000+i))
		flows = append(flows, f)
	}
	fake := NewFake(flows...)
	if n, err := Cleanup(context.Background(), fake, testWant()); n != len(flows) || err != nil {
		t.Errorf("Cleanup = %d, %v; want %d, nil", n, err, len(flows))
	}
	if len(fake.Flows()) != 0 {
		t.Errorf("%d flows left", len(fake.Flows()))
	}
}

func TestFakeDeleteWrongFamily(t *testing.T) {
	f := udp("192.168.1.2:1", "10.96.0.10:53", "192.168.1.4:5353")
	if _, err := NewFake(f).Delete(ipfamily.IPv6, []Flow{f}); err == nil {
		t.Error("Delete of an IPv4 flow as IPv6 succeeded")
	}
}

// flowEqual compares Flows by value (go-cmp cannot look inside netip types).
var flowEqual = cmp.Comparer(func(a, b Flow) bool { return a == b })

package netlink

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// svcElements returns n elements of a service-ips style verdict map.
func svcElements(n int) []nft.Element {
	els := make([]nft.Element, n)
	for i := range els {
		els[i] = nft.Element{
			Key:     []nft.Value{nft.A(netip.AddrFrom4([4]byte{10, 96, 0, byte(i)})), nft.N(nft.ProtoTCP), nft.N(uint32(80 + i))},
			Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "svc"},
		}
	}
	return els
}

// kernelElemDump returns the NEWSETELEM messages of an element dump as
// nf_tables_dump_set sends them: part p walks the set in the order orders[p]
// (the last order given for later parts), skips as many elements as the
// earlier parts sent, and sends at most per elements.
func kernelElemDump(t *testing.T, per int, orders ...[]nft.Element) []nlMsg {
	t.Helper()
	l, err := layoutOf(ipfamily.IPv4, keySvc)
	if err != nil {
		t.Fatal(err)
	}
	var b builder
	sent := 0
	for p := 0; sent < len(orders[0]); p++ {
		order := orders[min(p, len(orders)-1)]
		off := b.msg(unix.NFT_MSG_NEWSETELEM, unix.NLM_F_MULTI, 9, unix.NFPROTO_IPV4)
		b.str(unix.NFTA_SET_ELEM_LIST_TABLE, "t")
		b.str(unix.NFTA_SET_ELEM_LIST_SET, "service-ips")
		list := b.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		for _, e := range order[sent:min(sent+per, len(order))] {
			if err := b.element(l, e, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.endNest(list); err != nil {
			t.Fatal(err)
		}
		b.end(off)
		sent += per
	}
	msgs, err := parseMsgs(b.b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// collect feeds msgs to an elemDump and returns the decoded keys it passed on.
func collect(t *testing.T, msgs []nlMsg) ([]string, error) {
	t.Helper()
	l, err := layoutOf(ipfamily.IPv4, keySvc)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	d := newElemDump(func(key []byte, v *nft.Verdict) error {
		vals, err := l.decodeKey(key)
		if err != nil {
			return err
		}
		if v == nil || v.Chain != "svc" {
			t.Errorf("element %v: verdict %v", vals, v)
		}
		got = append(got, nft.KeyString(ipfamily.IPv4, keySvc, vals))
		return nil
	})
	for _, m := range msgs {
		if err := d.msg(m); err != nil {
			t.Fatal(err)
		}
	}
	return got, d.err()
}

func keyStrings(els []nft.Element) []string {
	var out []string
	for _, e := range els {
		out = append(out, nft.KeyString(ipfamily.IPv4, keySvc, e.Key))
	}
	return out
}

// TestElemDumpSteady: a dump of an unchanged hash table passes every element
// on once.
func TestElemDumpSteady(t *testing.T) {
	els := svcElements(6)
	got, err := collect(t, kernelElemDump(t, 2, els))
	if err != nil {
		t.Fatal(err)
	}
	if want := keyStrings(els); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestElemDumpResized: the hash table resizes (the walk order changes) after
// the first part of the dump. The kernel resumes by position, so the later
// parts send two elements again and never send two others; the dump must be
// reported as reordered, not taken as the set's content.
func TestElemDumpResized(t *testing.T) {
	els := svcElements(6)
	resized := slices.Clone(els)
	slices.Reverse(resized)
	msgs := kernelElemDump(t, 2, els, resized)
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	got, err := collect(t, msgs)
	if !errors.Is(err, errElementsReordered) {
		t.Fatalf("err = %v, want %v", err, errElementsReordered)
	}
	// The parts sent elements 0,1 (old order), then 3,2 and 1,0 (positions
	// 2-5 of the new order): 4 and 5 never came.
	if want := keyStrings([]nft.Element{els[0], els[1], els[3], els[2]}); !slices.Equal(got, want) {
		t.Fatalf("passed on %v, want %v", got, want)
	}
	t.Logf("reported: %v", err)
}

// TestRetryReordered checks the bounds of repeating reordered dumps.
func TestRetryReordered(t *testing.T) {
	ctx := context.Background()
	calls := 0
	dump := func(fails int, other error) func() error {
		calls = 0
		return func() error {
			calls++
			if calls <= fails {
				return errElementsReordered
			}
			return other
		}
	}
	if err := retryReordered(ctx, 5, time.Microsecond, time.Millisecond, dump(2, nil)); err != nil || calls != 3 {
		t.Errorf("two reordered dumps: err %v after %d calls, want nil after 3", err, calls)
	}
	if err := retryReordered(ctx, 5, time.Microsecond, time.Millisecond, dump(99, nil)); !errors.Is(err, errElementsReordered) || calls != 5 {
		t.Errorf("always reordered: err %v after %d calls, want reordered after 5", err, calls)
	}
	if err := retryReordered(ctx, 5, time.Microsecond, time.Millisecond, dump(0, errDumpInterrupted)); !errors.Is(err, errDumpInterrupted) || calls != 1 {
		t.Errorf("interrupted: err %v after %d calls, want interrupted after 1", err, calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := retryReordered(cctx, 5, time.Hour, time.Hour, dump(99, nil)); !errors.Is(err, context.Canceled) || !errors.Is(err, errElementsReordered) || calls != 1 {
		t.Errorf("cancelled: err %v after %d calls, want cancelled after 1", err, calls)
	}
	// The pauses double up to the cap.
	start := time.Now()
	if err := retryReordered(ctx, 4, 10*time.Millisecond, 20*time.Millisecond, dump(99, nil)); !errors.Is(err, errElementsReordered) {
		t.Errorf("capped: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("pauses of 10+20+20 ms took %v", d)
	}
}

package netlink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// Reading a set's elements.
//
// The kernel answers NFT_MSG_GETSETELEM in parts of at most 32 KiB and
// resumes each part by position: nf_tables_dump_set walks the set from its
// start and skips as many elements as it has already sent (cb->args[0]). For
// a hash set (nft_set_hash.c, rhashtable) the walk order is the bucket order,
// and the table resizes itself, with a new hash seed, from a deferred worker
// whenever it grows past 75% or shrinks below 30% load. A resize between two
// parts reorders the walk: the next part skips elements it never sent and
// sends again elements it already sent. No transaction is involved, so the
// ruleset generation does not change and the kernel does not flag the dump
// (NLM_F_DUMP_INTR follows the generation only). Right after a transaction
// that adds or deletes thousands of elements the worker is still resizing,
// and a dump comes back with some elements twice and as many missing.
//
// The elements of a set are unique by key, and while the set is unchanged
// the parts of a dump send exactly as many elements as the set holds, so an
// element missing from such a dump always comes with one sent twice. A dump
// that sends a key twice is therefore discarded and repeated, after a pause
// that lets the resize finish.

// errElementsReordered reports an element dump that sent a key twice: the
// set's hash table was resized during the dump.
var errElementsReordered = errors.New("set elements reordered during the dump (hash table resize)")

const (
	// elemDumpAttempts bounds the dumps of one set's elements.
	elemDumpAttempts = 10
	// elemRetryWait is the pause after the first reordered dump; it doubles
	// after each further one, up to elemRetryMaxWait (about 0.3 s in all).
	elemRetryWait    = time.Millisecond
	elemRetryMaxWait = 100 * time.Millisecond
)

// elemDump receives the messages of one element dump and passes each element
// to add, once: a key sent again is not passed on but recorded in dup.
type elemDump struct {
	seen map[string]struct{} // raw keys, as the kernel sent them
	dup  []byte
	add  func(key []byte, v *nft.Verdict) error
}

func newElemDump(add func(key []byte, v *nft.Verdict) error) *elemDump {
	return &elemDump{seen: map[string]struct{}{}, add: add}
}

// msg handles one NEWSETELEM message of the dump.
func (d *elemDump) msg(m nlMsg) error {
	return parseElements(m, func(key []byte, v *nft.Verdict) error {
		if _, ok := d.seen[string(key)]; ok {
			if d.dup == nil {
				d.dup = append([]byte{}, key...)
			}
			return nil
		}
		d.seen[string(key)] = struct{}{}
		return d.add(key, v)
	})
}

// err reports a key sent twice as errElementsReordered.
func (d *elemDump) err() error {
	if d.dup == nil {
		return nil
	}
	return fmt.Errorf("%w: element %x sent twice", errElementsReordered, d.dup)
}

// dumpElements dumps the elements of set in table of family f to add,
// calling start before each dump; a dump that ends reordered is repeated (see
// retryReordered), so after a nil error add has seen every element exactly
// once since the last start. Other errors (errDumpInterrupted among them)
// are returned at once.
func (c *Conn) dumpElements(ctx context.Context, f ipfamily.Family, table, set string, start func(), add func(key []byte, v *nft.Verdict) error) error {
	return retryReordered(ctx, elemDumpAttempts, elemRetryWait, elemRetryMaxWait, func() error {
		start()
		d := newElemDump(add)
		err := c.request(ctx, unix.NFT_MSG_GETSETELEM, unix.NLM_F_DUMP, f.Proto(), func(e *enc) {
			e.str(unix.NFTA_SET_ELEM_LIST_TABLE, table)
			e.str(unix.NFTA_SET_ELEM_LIST_SET, set)
		}, d.msg)
		if err != nil {
			return err
		}
		return d.err()
	})
}

// retryReordered calls dump until it returns anything but
// errElementsReordered, at most attempts times, pausing wait before the
// second call and doubling the pause (up to maxWait) before each further
// one. It returns dump's last error, or ctx's when ctx ends during a pause.
func retryReordered(ctx context.Context, attempts int, wait, maxWait time.Duration, dump func() error) error {
	for n := 1; ; n++ {
		err := dump()
		if !errors.Is(err, errElementsReordered) || n >= attempts {
			if err != nil && n > 1 {
				err = fmt.Errorf("dump %d: %w", n, err)
			}
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (after %d dumps: %w)", ctx.Err(), n, err)
		case <-t.C:
		}
		wait = min(2*wait, maxWait)
	}
}

package netlink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/nft"
)

// Apply implements nft.Conn: it commits the non-empty txs as one nf_tables
// batch, which the kernel applies all of or none of. With no ops at all it
// sends nothing (and so does not bump the generation).
//
// An error names the table and the op the kernel (or the builder) rejected,
// and wraps the kernel's errno. After an error the layout cache of every
// table of the batch is dropped: it is read again from the kernel.
func (c *Conn) Apply(ctx context.Context, txs ...*nft.Tx) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !slices.ContainsFunc(txs, func(tx *nft.Tx) bool { return !skip(tx) }) {
		return nil
	}
	b := &c.b
	defer b.release()
	b.layouts = func(t tableID, set string) (keyLayout, error) { return c.layout(ctx, t, set) }
	// Layout look-ups may talk to the kernel: build before reserving the
	// batch's sequence numbers.
	b.reset(txs, 0)
	if err := b.build(txs); err != nil {
		return err
	}
	c.lastBatch = len(b.b)
	seq0 := c.nextSeq(len(b.opOf))
	renumber(b.b, seq0)
	if err := c.deadline(ctx); err != nil {
		return err
	}
	if err := c.send(b.b); err != nil {
		c.broken = true
		return fmt.Errorf("%s: send batch of %d bytes: %w", tablesOf(txs), len(b.b), err)
	}
	errs, lost, err := c.collect(ctx, seq0, uint32(len(b.opOf)))
	if err != nil {
		// The batch's fate is unknown to us; the next Read tells.
		c.broken = true
		c.forget(txs)
		return fmt.Errorf("%s: %w", tablesOf(txs), err)
	}
	if len(errs) > 0 || lost {
		c.forget(txs)
		return batchError(txs, b.opOf, seq0, errs, lost)
	}
	for _, tx := range txs {
		if !skip(tx) {
			c.remember(tableID{tx.Family, tx.Table}, tx)
		}
	}
	return nil
}

// tablesOf names the tables of the non-empty txs, for errors.
func tablesOf(txs []*nft.Tx) string {
	var names []string
	for _, tx := range txs {
		if !skip(tx) {
			names = append(names, nft.Keyword(tx.Family)+" "+tx.Table)
		}
	}
	if len(names) == 1 {
		return "table " + names[0]
	}
	return "tables " + strings.Join(names, ", ")
}

// forget drops the layout cache of the tables of txs.
func (c *Conn) forget(txs []*nft.Tx) {
	for _, tx := range txs {
		if !skip(tx) {
			delete(c.keys, tableID{tx.Family, tx.Table})
		}
	}
}

// renumber rewrites the sequence numbers of the batch's messages to seq0,
// seq0+1, ... in order.
func renumber(b []byte, seq0 uint32) {
	for s := seq0; len(b) >= nlmsgHdrLen; s++ {
		n := int(nativeU32(b))
		putNativeU32(b[8:], s)
		if n = align4(n); n >= len(b) {
			return
		}
		b = b[n:]
	}
}

type msgError struct {
	seq   uint32
	errno unix.Errno
	text  string
}

// collect gathers the kernel's answers to the batch: only errors, since no
// acknowledgement was asked for. Batch processing is synchronous, so they are
// queued when send returns; a GETGEN request then fences the exchange.
// lost reports a receive-queue overflow (errors were dropped).
func (c *Conn) collect(ctx context.Context, seq0, n uint32) (errs []msgError, lost bool, err error) {
	take := func(m nlMsg) {
		if m.typ != unix.NLMSG_ERROR || m.seq < seq0 || m.seq >= seq0+n {
			return
		}
		if errno, _, text := nlError(m); errno != 0 {
			errs = append(errs, msgError{m.seq, errno, text})
		}
	}
	for range 1 << 20 {
		msgs, err := c.recv(true)
		if errors.Is(err, unix.ENOBUFS) {
			lost = true
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if msgs == nil {
			break
		}
		for _, m := range msgs {
			take(m)
		}
	}
	if _, err := c.generation(ctx, take); err != nil {
		return nil, false, fmt.Errorf("fence after batch: %w", err)
	}
	return errs, lost, nil
}

// batchError describes the kernel's rejection of the batch of txs by its
// first error: the table and op of the failed message (opOf maps message
// seq-seq0 to it), the errno and the kernel's text.
func batchError(txs []*nft.Tx, opOf []opRef, seq0 uint32, errs []msgError, lost bool) error {
	if len(errs) == 0 {
		return fmt.Errorf("%s: batch rejected; its errors overflowed the socket: %w", tablesOf(txs), unix.ENOBUFS)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].seq < errs[j].seq })
	e := errs[0]
	err := fmt.Errorf("%s: batch: %w", tablesOf(txs), kernelError(e.errno, e.text))
	if i := int(e.seq - seq0); i < len(opOf) && opOf[i].tx >= 0 {
		tx, op := txs[opOf[i].tx], int(opOf[i].op)
		err = &nft.OpError{Family: tx.Family, Table: tx.Table, Op: op, Detail: describeOp(tx.Ops[op]), Err: kernelError(e.errno, e.text)}
	}
	switch more := len(errs) - 1; {
	case lost:
		err = fmt.Errorf("%w (and more than %d more errors)", err, more)
	case more > 0:
		err = fmt.Errorf("%w (and %d more errors)", err, more)
	}
	return err
}

// Generation implements nft.Conn: the ruleset generation ID (NFT_MSG_GETGEN).
func (c *Conn) Generation(ctx context.Context) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.generation(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("ruleset generation: %w", err)
	}
	return g, nil
}

// generation asks for the generation ID; other receives any message that is
// not the answer.
func (c *Conn) generation(ctx context.Context, other func(nlMsg)) (uint32, error) {
	var gen uint32
	found := false
	err := c.requestOther(ctx, unix.NFT_MSG_GETGEN, 0, unix.AF_UNSPEC, nil, func(m nlMsg) error {
		if m.typ != unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWGEN || len(m.data) < nfgenLen {
			return nil
		}
		a := newAttrs(m.data[nfgenLen:])
		for a.next() {
			if a.typ == unix.NFTA_GEN_ID {
				gen, found = a.u32(), true
			}
		}
		return a.err
	}, other)
	if err == nil && !found {
		err = errors.New("no generation in the answer")
	}
	return gen, err
}

// layout returns the key layout of set in table t: from the cache or, failing
// that, from the kernel.
func (c *Conn) layout(ctx context.Context, t tableID, set string) (keyLayout, error) {
	if l, ok := c.keys[t][set]; ok {
		return l, nil
	}
	var l keyLayout
	err := c.request(ctx, unix.NFT_MSG_GETSET, 0, t.fam.Proto(), func(e *enc) {
		e.str(unix.NFTA_SET_TABLE, t.name)
		e.str(unix.NFTA_SET_NAME, set)
	}, func(m nlMsg) error {
		info, err := parseSet(m)
		if err != nil {
			return err
		}
		l, err = layoutFromMagic(info.keyType, info.keyLen)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("key type of set %s: %w", set, err)
	}
	if l == nil {
		return nil, fmt.Errorf("key type of set %s: no answer", set)
	}
	c.cacheLayout(t, set, l)
	return l, nil
}

func (c *Conn) cacheLayout(t tableID, set string, l keyLayout) {
	m := c.keys[t]
	if m == nil {
		m = map[string]keyLayout{}
		c.keys[t] = m
	}
	m[set] = l
}

// remember updates the layout cache after a committed transaction.
func (c *Conn) remember(t tableID, tx *nft.Tx) {
	for _, op := range tx.Ops {
		switch op.Kind {
		case nft.OpDeleteTable:
			delete(c.keys, t)
		case nft.OpDeleteSet:
			delete(c.keys[t], op.Name)
		case nft.OpAddSet:
			if l, err := layoutOf(t.fam, op.Set.Key); err == nil {
				c.cacheLayout(t, op.Name, l)
			}
		}
	}
}

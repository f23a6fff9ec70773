package netlink

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

const (
	nfDrop   = 0 // NF_DROP
	nfAccept = 1 // NF_ACCEPT: the policy of every base chain

	// byteorderBig is nft's BYTEORDER_BIG_ENDIAN in set user data.
	byteorderBig = 2

	// elemChunk bounds the element list of one message (a u16-long nested
	// attribute), as nft splits large element lists.
	elemChunk = 60 << 10

	// keepBuf is the largest batch buffer kept for the next transaction.
	keepBuf = 4 << 20

	maxNameLen = unix.NFT_CHAIN_MAXNAMELEN - 1
	// maxUserData is NFT_USERDATA_MAXLEN: the most user data (comments) a
	// rule or set can carry.
	maxUserData = 256
)

var hookNums = map[string]uint32{
	"prerouting":  unix.NF_INET_PRE_ROUTING,
	"input":       unix.NF_INET_LOCAL_IN,
	"forward":     unix.NF_INET_FORWARD,
	"output":      unix.NF_INET_LOCAL_OUT,
	"postrouting": unix.NF_INET_POST_ROUTING,
}

// builder compiles the transactions of one Apply into one netlink batch:
// BATCH_BEGIN, the messages of every non-empty tx in order, each addressed to
// its tx's family and table, BATCH_END.
//
// Contract: reset then build, with the same txs; afterwards b.b is the batch
// and opOf maps each of its messages back to its (tx, op). The builder keeps
// no reference to the txs, and reuses its buffers from one Apply to the next.
type builder struct {
	enc
	// The table of the tx being built.
	fam    uint8
	family ipfamily.Family
	table  string
	tx     int32  // its index in the txs
	seq    uint32 // next sequence number
	// opOf maps seq-seq0 to the op a message belongs to (tx -1 for the batch
	// delimiters).
	seq0 uint32
	opOf []opRef
	xs   []expr.Any
	// layouts resolves the key layout of a set of table t that the batch has
	// not defined (so far).
	layouts func(t tableID, set string) (keyLayout, error)
	// local holds the layouts of the sets the batch defined so far.
	local map[setRef]keyLayout
}

// opRef names the op of a batch message: txs[tx].Ops[op].
type opRef struct{ tx, op int32 }

// setRef names a set of a table.
type setRef struct {
	t   tableID
	set string
}

// skip reports whether Apply skips tx: it has no ops.
func skip(tx *nft.Tx) bool { return tx == nil || len(tx.Ops) == 0 }

// reset prepares the builder for txs, numbering messages from seq.
func (b *builder) reset(txs []*nft.Tx, seq uint32) {
	// Size the buffer once: growing a buffer of tens of megabytes by
	// append's 1.25 factor costs more than compiling the batch.
	est := 64
	for _, tx := range txs {
		if !skip(tx) {
			est += estimate(tx)
		}
	}
	if cap(b.b) < est {
		b.b = make([]byte, 0, est)
	}
	b.b = b.b[:0]
	b.seq, b.seq0 = seq, seq
	b.opOf = b.opOf[:0]
	clear(b.local)
	if b.local == nil {
		b.local = map[setRef]keyLayout{}
	}
}

// release drops a buffer too large to keep between transactions (the
// buffer of a full load), and the layouts function (it holds a context).
func (b *builder) release() {
	if cap(b.b) > keepBuf {
		b.b = nil
	}
	b.layouts = nil
}

// estimate returns an upper estimate of the size of the messages of tx.
func estimate(tx *nft.Tx) int {
	n := 0
	for _, op := range tx.Ops {
		n += 64 + 2*len(tx.Table) + len(op.Name)
		switch {
		case op.Rule != nil:
			n += 128*len(op.Rule.Exprs) + len(op.Rule.Comment)
			for _, e := range op.Rule.Exprs {
				if v, ok := e.(nft.Verdict); ok {
					n += len(v.Chain)
				}
			}
		case op.Set != nil:
			n += 128 + len(op.Set.Comment)
		case op.Chain != nil:
			n += 64
		}
		for _, e := range op.Elements {
			n += 96
			if e.Verdict != nil {
				n += len(e.Verdict.Chain)
			}
		}
	}
	return n
}

// grow makes room for n more bytes, doubling the buffer when it is full.
func (b *builder) grow(n int) {
	if cap(b.b)-len(b.b) < n {
		nb := make([]byte, len(b.b), 2*cap(b.b)+n)
		copy(nb, b.b)
		b.b = nb
	}
}

// begin starts a message of op i of the current tx.
func (b *builder) begin(t uint16, flags uint16, op int) int {
	b.grow(4 << 10)
	b.opOf = append(b.opOf, opRef{b.tx, int32(op)})
	s := b.seq
	b.seq++
	return b.msg(t, unix.NLM_F_REQUEST|flags, s, b.fam)
}

func (b *builder) batchDelimiter(t uint16) {
	b.opOf = append(b.opOf, opRef{-1, -1})
	b.rawMsg(t, b.seq, unix.NFNL_SUBSYS_NFTABLES)
	b.seq++
}

// build encodes the batch of txs, skipping empty ones (see skip). An error
// names the table and the op it rejects; nothing is sent then.
func (b *builder) build(txs []*nft.Tx) error {
	b.batchDelimiter(unix.NFNL_MSG_BATCH_BEGIN)
	for ti, tx := range txs {
		if skip(tx) {
			continue
		}
		if err := checkName("table", tx.Table); err != nil {
			return fmt.Errorf("table %s: %w", nft.Keyword(tx.Family), err)
		}
		b.fam, b.family, b.table, b.tx = tx.Family.Proto(), tx.Family, tx.Table, int32(ti)
		for i, op := range tx.Ops {
			if err := b.op(i, op); err != nil {
				return &nft.OpError{Family: tx.Family, Table: tx.Table, Op: i, Detail: describeOp(op), Err: err}
			}
		}
	}
	b.batchDelimiter(unix.NFNL_MSG_BATCH_END)
	return nil
}

// cur is the current table.
func (b *builder) cur() tableID { return tableID{b.family, b.table} }

// dropLocal forgets the sets the batch defined in the current table.
func (b *builder) dropLocal() {
	t := b.cur()
	for k := range b.local {
		if k.t == t {
			delete(b.local, k)
		}
	}
}

func (b *builder) op(i int, op nft.Op) error {
	switch op.Kind {
	case nft.OpAddTable, nft.OpCreateTable:
		flags := uint16(unix.NLM_F_CREATE)
		if op.Kind == nft.OpCreateTable {
			flags |= unix.NLM_F_EXCL
		}
		off := b.begin(unix.NFT_MSG_NEWTABLE, flags, i)
		b.str(unix.NFTA_TABLE_NAME, b.table)
		b.end(off)
	case nft.OpDeleteTable:
		off := b.begin(unix.NFT_MSG_DELTABLE, 0, i)
		b.str(unix.NFTA_TABLE_NAME, b.table)
		b.end(off)
		b.dropLocal()
	case nft.OpAddChain:
		return b.addChain(i, op)
	case nft.OpFlushChain, nft.OpDeleteChain:
		if err := checkName("chain", op.Name); err != nil {
			return err
		}
		if op.Kind == nft.OpDeleteChain {
			off := b.begin(unix.NFT_MSG_DELCHAIN, 0, i)
			b.str(unix.NFTA_CHAIN_TABLE, b.table)
			b.str(unix.NFTA_CHAIN_NAME, op.Name)
			b.end(off)
			break
		}
		// DELRULE without a handle deletes every rule of the chain (and
		// without a chain, of the table: the chain attribute is essential).
		off := b.begin(unix.NFT_MSG_DELRULE, 0, i)
		b.str(unix.NFTA_RULE_TABLE, b.table)
		b.str(unix.NFTA_RULE_CHAIN, op.Name)
		b.end(off)
	case nft.OpAddRule:
		return b.addRule(i, op)
	case nft.OpAddSet:
		return b.addSet(i, op)
	case nft.OpFlushSet, nft.OpDeleteSet:
		if err := checkName("set", op.Name); err != nil {
			return err
		}
		if op.Kind == nft.OpDeleteSet {
			delete(b.local, setRef{b.cur(), op.Name})
			off := b.begin(unix.NFT_MSG_DELSET, 0, i)
			b.str(unix.NFTA_SET_TABLE, b.table)
			b.str(unix.NFTA_SET_NAME, op.Name)
			b.end(off)
			break
		}
		// DELSETELEM without an element list flushes the set.
		off := b.begin(unix.NFT_MSG_DELSETELEM, 0, i)
		b.str(unix.NFTA_SET_ELEM_LIST_TABLE, b.table)
		b.str(unix.NFTA_SET_ELEM_LIST_SET, op.Name)
		b.end(off)
	case nft.OpAddElements, nft.OpDeleteElements:
		return b.elements(i, op)
	default:
		return fmt.Errorf("unknown op kind %d", op.Kind)
	}
	return nil
}

func (b *builder) addChain(i int, op nft.Op) error {
	if op.Chain == nil {
		return fmt.Errorf("no chain")
	}
	if err := checkName("chain", op.Chain.Name); err != nil {
		return err
	}
	off := b.begin(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE, i)
	b.str(unix.NFTA_CHAIN_TABLE, b.table)
	b.str(unix.NFTA_CHAIN_NAME, op.Chain.Name)
	if h := op.Chain.Hook; h != nil {
		num, ok := hookNums[h.Hook]
		if !ok {
			return fmt.Errorf("unknown hook %q", h.Hook)
		}
		if h.Type != "nat" && h.Type != "filter" {
			return fmt.Errorf("unknown chain type %q", h.Type)
		}
		n := b.nest(unix.NFTA_CHAIN_HOOK)
		b.u32(unix.NFTA_HOOK_HOOKNUM, num)
		b.u32(unix.NFTA_HOOK_PRIORITY, uint32(int32(h.Priority)))
		_ = b.endNest(n)
		b.u32(unix.NFTA_CHAIN_POLICY, nfAccept)
		b.str(unix.NFTA_CHAIN_TYPE, h.Type)
	}
	b.end(off)
	return nil
}

func (b *builder) addRule(i int, op nft.Op) error {
	if op.Rule == nil {
		return fmt.Errorf("no rule")
	}
	if err := checkName("chain", op.Name); err != nil {
		return err
	}
	var err error
	if b.xs, err = compileRule(b.xs[:0], b.family, op.Rule); err != nil {
		return err
	}
	off := b.begin(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, i)
	b.str(unix.NFTA_RULE_TABLE, b.table)
	b.str(unix.NFTA_RULE_CHAIN, op.Name)
	n := b.nest(unix.NFTA_RULE_EXPRESSIONS)
	for _, x := range b.xs {
		el := b.nest(unix.NFTA_LIST_ELEM)
		data, err := expr.Marshal(b.fam, x)
		if err != nil {
			return err
		}
		b.b = append(b.b, data...)
		if err := b.endNest(el); err != nil {
			return err
		}
	}
	if err := b.endNest(n); err != nil {
		return err
	}
	if c := op.Rule.Comment; c != "" {
		ud, err := commentData(nil, userdata.TypeComment, c)
		if err != nil {
			return err
		}
		b.attr(unix.NFTA_RULE_USERDATA, ud)
	}
	b.end(off)
	return nil
}

func (b *builder) addSet(i int, op nft.Op) error {
	s := op.Set
	if s == nil {
		return fmt.Errorf("no set")
	}
	if err := checkName("set", s.Name); err != nil {
		return err
	}
	l, err := layoutOf(b.family, s.Key)
	if err != nil {
		return err
	}
	var flags uint32
	if s.Verdict {
		flags |= unix.NFT_SET_MAP
	}
	if s.Timeout > 0 {
		if s.Verdict {
			return fmt.Errorf("a verdict map cannot have a timeout")
		}
		flags |= unix.NFT_SET_TIMEOUT | unix.NFT_SET_EVAL
	}
	off := b.begin(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, i)
	b.str(unix.NFTA_SET_TABLE, b.table)
	b.str(unix.NFTA_SET_NAME, s.Name)
	b.u32(unix.NFTA_SET_FLAGS, flags)
	b.u32(unix.NFTA_SET_KEY_TYPE, l.magic())
	b.u32(unix.NFTA_SET_KEY_LEN, l.keyLen())
	if s.Verdict {
		b.u32(unix.NFTA_SET_DATA_TYPE, unix.NFT_DATA_VERDICT)
		b.u32(unix.NFTA_SET_DATA_LEN, 0)
	}
	if s.Timeout > 0 {
		b.u64(unix.NFTA_SET_TIMEOUT, uint64(s.Timeout/time.Millisecond))
	}
	b.u32(unix.NFTA_SET_ID, b.seq)
	// User data as nft writes it: key byte order (big endian for one field,
	// none for a concatenation), data byte order for maps, the comment.
	var ud []byte
	order := uint32(byteorderBig)
	if len(l) > 1 {
		order = 0
	}
	ud = userdata.AppendUint32(ud, userdata.NFTNL_UDATA_SET_KEYBYTEORDER, order)
	if s.Verdict {
		ud = userdata.AppendUint32(ud, userdata.NFTNL_UDATA_SET_DATABYTEORDER, 0)
	}
	if s.Comment != "" {
		if ud, err = commentData(ud, userdata.NFTNL_UDATA_SET_COMMENT, s.Comment); err != nil {
			return err
		}
	}
	b.attr(unix.NFTA_SET_USERDATA, ud)
	b.end(off)
	b.local[setRef{b.cur(), s.Name}] = l
	return nil
}

func (b *builder) elements(i int, op nft.Op) error {
	if err := checkName("set", op.Name); err != nil {
		return err
	}
	l, ok := b.local[setRef{b.cur(), op.Name}]
	if !ok {
		var err error
		if l, err = b.layouts(b.cur(), op.Name); err != nil {
			return err
		}
	}
	t, flags := uint16(unix.NFT_MSG_NEWSETELEM), uint16(unix.NLM_F_CREATE)
	if op.Kind == nft.OpDeleteElements {
		t, flags = unix.NFT_MSG_DELSETELEM, 0
	}
	for start := 0; start < len(op.Elements); {
		off := b.begin(t, flags, i)
		b.str(unix.NFTA_SET_ELEM_LIST_TABLE, b.table)
		b.str(unix.NFTA_SET_ELEM_LIST_SET, op.Name)
		list := b.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		for ; start < len(op.Elements) && len(b.b)-list < elemChunk; start++ {
			b.grow(1 << 10)
			if err := b.element(l, op.Elements[start], op.Kind == nft.OpAddElements); err != nil {
				return fmt.Errorf("element %d: %w", start, err)
			}
		}
		if err := b.endNest(list); err != nil {
			return err
		}
		b.end(off)
	}
	return nil
}

func (b *builder) element(l keyLayout, e nft.Element, withData bool) error {
	el := b.nest(unix.NFTA_LIST_ELEM)
	k := b.nest(unix.NFTA_SET_ELEM_KEY)
	v := len(b.b)
	b.b = append(b.b, 0, 0, 0, 0) // NFTA_DATA_VALUE header
	var err error
	if b.b, err = l.appendKey(b.b, e.Key); err != nil {
		return err
	}
	putAttrHdr(b.b[v:], unix.NFTA_DATA_VALUE, len(b.b)-v)
	b.pad()
	_ = b.endNest(k)
	if withData && e.Verdict != nil {
		vd, err := verdictOf(*e.Verdict)
		if err != nil {
			return err
		}
		d := b.nest(unix.NFTA_SET_ELEM_DATA)
		dv := b.nest(unix.NFTA_DATA_VERDICT)
		b.u32(unix.NFTA_VERDICT_CODE, uint32(int32(vd.Kind)))
		if vd.Chain != "" {
			if err := checkName("chain", vd.Chain); err != nil {
				return err
			}
			b.str(unix.NFTA_VERDICT_CHAIN, vd.Chain)
		}
		_ = b.endNest(dv)
		_ = b.endNest(d)
	}
	return b.endNest(el)
}

func putAttrHdr(b []byte, t uint16, n int) {
	binary.NativeEndian.PutUint16(b, uint16(n))
	binary.NativeEndian.PutUint16(b[2:], t)
}

// commentData appends a comment TLV to user data ud, within the kernel's and
// the TLV's limits.
func commentData(ud []byte, t userdata.Type, c string) ([]byte, error) {
	if n := len(ud) + 2 + len(c) + 1; len(c)+1 > 0xff || n > maxUserData {
		return nil, fmt.Errorf("comment of %d bytes too long (user data of %d bytes exceeds %d)", len(c), n, maxUserData)
	}
	return userdata.AppendString(ud, t, c), nil
}

func checkName(what, n string) error {
	if n == "" || len(n) > maxNameLen {
		return fmt.Errorf("%s name %q: empty or longer than %d bytes", what, n, maxNameLen)
	}
	return nil
}

func describeOp(op nft.Op) string {
	switch op.Kind {
	case nft.OpAddTable:
		return "add table"
	case nft.OpCreateTable:
		return "create table"
	case nft.OpDeleteTable:
		return "delete table"
	case nft.OpAddChain:
		return "add chain " + op.Name
	case nft.OpFlushChain:
		return "flush chain " + op.Name
	case nft.OpDeleteChain:
		return "delete chain " + op.Name
	case nft.OpAddRule:
		return "add rule to " + op.Name
	case nft.OpAddSet:
		return "add set " + op.Name
	case nft.OpFlushSet:
		return "flush set " + op.Name
	case nft.OpDeleteSet:
		return "delete set " + op.Name
	case nft.OpAddElements:
		return fmt.Sprintf("add %d elements to %s", len(op.Elements), op.Name)
	case nft.OpDeleteElements:
		return fmt.Sprintf("delete %d elements from %s", len(op.Elements), op.Name)
	}
	return fmt.Sprintf("op kind %d", op.Kind)
}

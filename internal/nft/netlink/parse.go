package netlink

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// Decoders of the kernel's dump messages (NEWCHAIN, NEWSET, NEWRULE,
// NEWSETELEM), tolerant of attributes they do not know.

var hookNames = map[uint32]string{
	unix.NF_INET_PRE_ROUTING:  "prerouting",
	unix.NF_INET_LOCAL_IN:     "input",
	unix.NF_INET_FORWARD:      "forward",
	unix.NF_INET_LOCAL_OUT:    "output",
	unix.NF_INET_POST_ROUTING: "postrouting",
}

func payload(m nlMsg) (*attrs, error) {
	if len(m.data) < nfgenLen {
		return nil, fmt.Errorf("short message of type %#x", m.typ)
	}
	return newAttrs(m.data[nfgenLen:]), nil
}

// parseChain decodes a chain; policy is NF_ACCEPT for regular chains.
func parseChain(m nlMsg) (ch *nft.Chain, table string, policy uint32, err error) {
	a, err := payload(m)
	if err != nil {
		return nil, "", 0, err
	}
	ch = &nft.Chain{}
	policy = nfAccept
	var hook *nft.Hook
	var typ string
	for a.next() {
		switch a.typ {
		case unix.NFTA_CHAIN_TABLE:
			table = a.str()
		case unix.NFTA_CHAIN_NAME:
			ch.Name = a.str()
		case unix.NFTA_CHAIN_TYPE:
			typ = a.str()
		case unix.NFTA_CHAIN_POLICY:
			policy = a.u32()
		case unix.NFTA_CHAIN_HOOK:
			hook = &nft.Hook{}
			h := newAttrs(a.val)
			for h.next() {
				switch h.typ {
				case unix.NFTA_HOOK_HOOKNUM:
					n := h.u32()
					if hook.Hook = hookNames[n]; hook.Hook == "" {
						hook.Hook = fmt.Sprintf("hook%d", n)
					}
				case unix.NFTA_HOOK_PRIORITY:
					hook.Priority = int(int32(h.u32()))
				}
			}
			if h.err != nil {
				return nil, "", 0, h.err
			}
		}
	}
	if hook != nil {
		hook.Type = typ
		ch.Hook = hook
	}
	return ch, table, policy, a.err
}

// setInfo is a kernel set definition.
type setInfo struct {
	table, name       string
	flags             uint32
	keyType, keyLen   uint32
	dataType, dataLen uint32
	timeout           time.Duration
	comment           string
}

func parseSet(m nlMsg) (*setInfo, error) {
	a, err := payload(m)
	if err != nil {
		return nil, err
	}
	s := &setInfo{}
	for a.next() {
		switch a.typ {
		case unix.NFTA_SET_TABLE:
			s.table = a.str()
		case unix.NFTA_SET_NAME:
			s.name = a.str()
		case unix.NFTA_SET_FLAGS:
			s.flags = a.u32()
		case unix.NFTA_SET_KEY_TYPE:
			s.keyType = a.u32()
		case unix.NFTA_SET_KEY_LEN:
			s.keyLen = a.u32()
		case unix.NFTA_SET_DATA_TYPE:
			s.dataType = a.u32()
		case unix.NFTA_SET_DATA_LEN:
			s.dataLen = a.u32()
		case unix.NFTA_SET_TIMEOUT:
			s.timeout = timeoutOf(a.u64())
		case unix.NFTA_SET_USERDATA:
			s.comment, _ = udataString(a.val, 7) // NFTNL_UDATA_SET_COMMENT
		}
	}
	return s, a.err
}

// udataString returns the NUL-terminated string of TLV type t in libnftnl
// user data (u8 type, u8 length, value), checking every bound.
func udataString(b []byte, t byte) (string, bool) {
	for len(b) >= 2 {
		typ, n := b[0], int(b[1])
		if 2+n > len(b) {
			return "", false
		}
		if typ == t {
			return strings.TrimSuffix(string(b[2:2+n]), "\x00"), true
		}
		b = b[2+n:]
	}
	return "", false
}

// parseRule decodes a rule of table; r is nil for another table's rule.
func parseRule(f ipfamily.Family, m nlMsg, table string, sets map[string]*setInfo) (chain string, r *nft.Rule, err error) {
	a, err := payload(m)
	if err != nil {
		return "", nil, err
	}
	var exprs []byte
	var comment, tbl string
	var handle uint64
	for a.next() {
		switch a.typ {
		case unix.NFTA_RULE_HANDLE:
			handle = a.u64()
		case unix.NFTA_RULE_TABLE:
			tbl = a.str()
		case unix.NFTA_RULE_CHAIN:
			chain = a.str()
		case unix.NFTA_RULE_EXPRESSIONS:
			exprs = a.val
		case unix.NFTA_RULE_USERDATA:
			comment, _ = udataString(a.val, 0) // NFTNL_UDATA_RULE_COMMENT
		}
	}
	if a.err != nil {
		return "", nil, a.err
	}
	if tbl != table {
		return "", nil, nil
	}
	r = decodeRule(f, exprs, comment, sets)
	r.Handle = handle
	return chain, r, nil
}

// decodeRule decompiles a rule's expression list, or returns the
// unrecognised rule that stands for it.
func decodeRule(f ipfamily.Family, exprs []byte, comment string, sets map[string]*setInfo) *nft.Rule {
	xs, names, err := parseExprs(f.Proto(), exprs)
	if err != nil {
		return unrecognised(names, err, comment)
	}
	if xs == nil && len(names) > 0 {
		return unrecognised(names, nil, comment)
	}
	out, err := decompile(f, xs)
	if err == nil {
		err = checkSetRefs(out, sets)
	}
	if err != nil {
		return unrecognised(names, err, comment)
	}
	return &nft.Rule{Exprs: out, Comment: comment}
}

// checkSetRefs rejects rules that use anonymous sets (svcnet never makes any;
// Read does not return them).
func checkSetRefs(xs []nft.Expr, sets map[string]*setInfo) error {
	for _, e := range xs {
		var n string
		switch e := e.(type) {
		case nft.Lookup:
			n = e.Set
		case nft.VMap:
			n = e.Map
		case nft.Update:
			n = e.Set
		default:
			continue
		}
		if s := sets[n]; s == nil || s.flags&unix.NFT_SET_ANONYMOUS != 0 {
			return fmt.Errorf("uses anonymous or unknown set %s", n)
		}
	}
	return nil
}

// parseElements calls fn for each element of a NEWSETELEM message: its key
// and, for a verdict map, its verdict.
func parseElements(m nlMsg, fn func(key []byte, v *nft.Verdict) error) error {
	a, err := payload(m)
	if err != nil {
		return err
	}
	for a.next() {
		if a.typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			continue
		}
		list := newAttrs(a.val)
		for list.next() {
			if list.typ != unix.NFTA_LIST_ELEM {
				continue
			}
			var key []byte
			var v *nft.Verdict
			el := newAttrs(list.val)
			for el.next() {
				switch el.typ {
				case unix.NFTA_SET_ELEM_KEY:
					key = dataValue(el.val)
				case unix.NFTA_SET_ELEM_DATA:
					if v, err = dataVerdict(el.val); err != nil {
						return err
					}
				}
			}
			if el.err != nil {
				return el.err
			}
			if err := fn(key, v); err != nil {
				return err
			}
		}
		if list.err != nil {
			return list.err
		}
	}
	return a.err
}

// dataValue returns the NFTA_DATA_VALUE inside an nft_data attribute.
func dataValue(b []byte) []byte {
	a := newAttrs(b)
	for a.next() {
		if a.typ == unix.NFTA_DATA_VALUE {
			return a.val
		}
	}
	return nil
}

// dataVerdict decodes the NFTA_DATA_VERDICT inside an nft_data attribute (nil
// when it holds a value).
func dataVerdict(b []byte) (*nft.Verdict, error) {
	a := newAttrs(b)
	for a.next() {
		if a.typ != unix.NFTA_DATA_VERDICT {
			continue
		}
		var code int32
		var chain string
		v := newAttrs(a.val)
		for v.next() {
			switch v.typ {
			case unix.NFTA_VERDICT_CODE:
				code = int32(v.u32())
			case unix.NFTA_VERDICT_CHAIN:
				chain = v.str()
			}
		}
		if v.err != nil {
			return nil, v.err
		}
		switch code {
		case nfAccept:
			return &nft.Verdict{Kind: nft.Accept}, nil
		case nfDrop:
			return &nft.Verdict{Kind: nft.Drop}, nil
		case unix.NFT_RETURN:
			return &nft.Verdict{Kind: nft.Return}, nil
		case unix.NFT_JUMP:
			return &nft.Verdict{Kind: nft.Jump, Chain: chain}, nil
		case unix.NFT_GOTO:
			return &nft.Verdict{Kind: nft.Goto, Chain: chain}, nil
		}
		return nil, fmt.Errorf("verdict code %d", code)
	}
	return nil, a.err
}

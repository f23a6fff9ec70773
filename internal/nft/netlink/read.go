package netlink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// nftaTableHandle is NFTA_TABLE_HANDLE (uapi nf_tables.h), which x/sys/unix lacks.
const nftaTableHandle = 4

// readAttempts bounds the retries of a Read that raced with another writer.
const readAttempts = 5

// Read implements nft.Conn. The table is read with one dump per object kind
// (and one per set for its elements); the ruleset generation is compared
// before and after, and the read repeated when someone committed in between,
// so the result is one consistent version of the table. The element dump of a
// set is also repeated when the set's hash table resized during it, which
// changes no generation (see dumpElements).
//
// Mapping to the model: rules are decompiled (see IsUnrecognised for rules
// that cannot be); a base chain whose policy is not accept gets a trailing
// unrecognised rule naming the policy; a set whose kind svcnet never creates
// (interval sets, data maps, other key types) comes back with an unrecognised
// Comment; the kernel does not record whether a set address is a source or a
// destination, so Set.Key takes it from the first rule (in chain name order)
// that uses the set, and is FieldDaddr for an unused set. Elements of dynamic
// (timeout) sets are runtime state and are not returned.
func (c *Conn) Read(ctx context.Context, f ipfamily.Family, name string) (*nft.Table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for range readAttempts {
		var g0, g1 uint32
		var t *nft.Table
		if g0, err = c.generation(ctx, nil); err != nil {
			break
		}
		t, err = c.readOnce(ctx, f, name)
		if err != nil && !errors.Is(err, errDumpInterrupted) {
			break
		}
		if err == nil {
			if g1, err = c.generation(ctx, nil); err != nil {
				break
			}
			if g0 == g1 {
				return t, nil
			}
			err = errDumpInterrupted
		}
	}
	if errors.Is(err, nft.ErrNoTable) {
		return nil, err
	}
	return nil, fmt.Errorf("read table %s %s: %w", nft.Keyword(f), name, err)
}

// Tables implements nft.Conn: the names of family f's tables, sorted, from
// one NFT_MSG_GETTABLE dump (repeated when a concurrent change interrupts it).
// Every table of the family is listed, whoever created it.
func (c *Conn) Tables(ctx context.Context, f ipfamily.Family) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fam := f.Proto()
	var names []string
	var err error
	for range readAttempts {
		names = names[:0]
		err = c.request(ctx, unix.NFT_MSG_GETTABLE, unix.NLM_F_DUMP, fam, nil, func(m nlMsg) error {
			if m.typ != unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWTABLE {
				return nil
			}
			a, err := payload(m)
			if err != nil {
				return err
			}
			if m.data[0] != fam { // the kernel filters by family; be sure
				return nil
			}
			for a.next() {
				if a.typ == unix.NFTA_TABLE_NAME {
					names = append(names, a.str())
				}
			}
			return a.err
		})
		if !errors.Is(err, errDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list %s tables: %w", f, err)
	}
	slices.Sort(names)
	return names, nil
}

func (c *Conn) readOnce(ctx context.Context, f ipfamily.Family, name string) (*nft.Table, error) {
	fam := f.Proto()
	var handle uint64
	err := c.request(ctx, unix.NFT_MSG_GETTABLE, 0, fam, func(e *enc) {
		e.str(unix.NFTA_TABLE_NAME, name)
	}, func(m nlMsg) error {
		a, err := payload(m)
		if err != nil {
			return err
		}
		for a.next() {
			if a.typ == nftaTableHandle {
				handle = a.u64()
			}
		}
		return nil
	})
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("table %s %s: %w", nft.Keyword(f), name, nft.ErrNoTable)
	}
	if err != nil {
		return nil, fmt.Errorf("get table: %w", err)
	}
	t := nft.NewTable(f, name)
	t.Handle = handle

	// Chains.
	err = c.request(ctx, unix.NFT_MSG_GETCHAIN, unix.NLM_F_DUMP, fam, func(e *enc) {
		e.str(unix.NFTA_CHAIN_TABLE, name)
	}, func(m nlMsg) error {
		ch, table, policy, err := parseChain(m)
		if err != nil || table != name {
			return err
		}
		t.Chains[ch.Name] = ch
		if ch.Hook != nil && policy != nfAccept {
			ch.Rules = append(ch.Rules, &nft.Rule{Comment: fmt.Sprintf("%spolicy %s>", UnrecognisedPrefix, policyName(policy))})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump chains: %w", err)
	}

	// Sets, before the rules that use them.
	sets := map[string]*setInfo{}
	err = c.request(ctx, unix.NFT_MSG_GETSET, unix.NLM_F_DUMP, fam, func(e *enc) {
		e.str(unix.NFTA_SET_TABLE, name)
	}, func(m nlMsg) error {
		info, err := parseSet(m)
		if err != nil || info.table != name {
			return err
		}
		sets[info.name] = info
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump sets: %w", err)
	}

	// Rules of the whole table, chain by chain in order.
	var policyRules map[string][]*nft.Rule
	for _, ch := range t.Chains {
		if len(ch.Rules) > 0 { // the policy marker goes last
			if policyRules == nil {
				policyRules = map[string][]*nft.Rule{}
			}
			policyRules[ch.Name], ch.Rules = ch.Rules, nil
		}
	}
	err = c.request(ctx, unix.NFT_MSG_GETRULE, unix.NLM_F_DUMP, fam, func(e *enc) {
		e.str(unix.NFTA_RULE_TABLE, name)
	}, func(m nlMsg) error {
		chain, r, err := parseRule(f, m, name, sets)
		if err != nil || r == nil {
			return err
		}
		ch, ok := t.Chains[chain]
		if !ok { // the chain came after the chain dump: read again
			return fmt.Errorf("%w: rule of unknown chain %s", errDumpInterrupted, chain)
		}
		ch.Rules = append(ch.Rules, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump rules: %w", err)
	}
	for n, rs := range policyRules {
		t.Chains[n].Rules = append(t.Chains[n].Rules, rs...)
	}

	for _, info := range sets {
		if info.flags&unix.NFT_SET_ANONYMOUS != 0 {
			continue
		}
		s, err := c.readSet(ctx, t, info)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", info.name, err)
		}
		t.Sets[s.Name] = s
	}
	return t, nil
}

func policyName(p uint32) string {
	switch p {
	case 0:
		return "drop"
	case nfAccept:
		return "accept"
	}
	return fmt.Sprintf("%d", p)
}

// readSet converts a kernel set to the model and reads its elements.
func (c *Conn) readSet(ctx context.Context, t *nft.Table, info *setInfo) (*nft.Set, error) {
	s := &nft.Set{Name: info.name, Comment: info.comment, Elements: map[string]nft.Element{}}
	l, err := layoutFromMagic(info.keyType, info.keyLen)
	isMap := info.flags&unix.NFT_SET_MAP != 0
	switch {
	case err != nil:
	case info.flags&(unix.NFT_SET_INTERVAL|unix.NFT_SET_OBJECT) != 0:
		err = fmt.Errorf("flags %#x", info.flags)
	case isMap && info.dataType != unix.NFT_DATA_VERDICT:
		err = fmt.Errorf("data type %#x", info.dataType)
	case info.flags&unix.NFT_SET_TIMEOUT != 0 && info.timeout <= 0:
		err = errors.New("timeout flag without a timeout")
	}
	if err != nil {
		s.Comment = fmt.Sprintf("%sset: %v> %s", UnrecognisedPrefix, err, info.comment)
		return s, nil
	}
	s.Key = keyFieldsFromRules(t, s.Name, l)
	if s.Key == nil {
		s.Key = l.fields()
	}
	s.Verdict = isMap
	if info.flags&unix.NFT_SET_TIMEOUT != 0 {
		s.Timeout = info.timeout
		c.cacheLayout(tableID{t.Family, t.Name}, s.Name, l)
		return s, nil // elements of dynamic sets are runtime state
	}
	c.cacheLayout(tableID{t.Family, t.Name}, s.Name, l)
	err = c.dumpElements(ctx, t.Family, t.Name, s.Name, func() {
		s.Elements = map[string]nft.Element{}
	}, func(key []byte, v *nft.Verdict) error {
		vals, err := l.decodeKey(key)
		if err != nil {
			return err
		}
		if isMap != (v != nil) {
			return fmt.Errorf("element %x: verdict %v in a map=%v", key, v, isMap)
		}
		e := nft.Element{Key: vals, Verdict: v}
		s.Elements[nft.KeyString(t.Family, s.Key, vals)] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump elements: %w", err)
	}
	return s, nil
}

// keyFieldsFromRules returns the fields of the first rule expression (chains
// in name order) that uses set with a key of layout l.
func keyFieldsFromRules(t *nft.Table, set string, l keyLayout) []nft.Field {
	for _, cn := range t.ChainNames() {
		for _, r := range t.Chains[cn].Rules {
			for _, e := range r.Exprs {
				var fs []nft.Field
				switch e := e.(type) {
				case nft.Lookup:
					if e.Set == set {
						fs = e.Fields
					}
				case nft.VMap:
					if e.Map == set {
						fs = e.Fields
					}
				case nft.Update:
					if e.Set == set {
						fs = e.Fields
					}
				}
				if fl, err := layoutOf(t.Family, fs); fs != nil && err == nil && fl.magic() == l.magic() {
					return append([]nft.Field(nil), fs...)
				}
			}
		}
	}
	return nil
}

// timeoutOf converts the kernel's milliseconds.
func timeoutOf(ms uint64) time.Duration { return time.Duration(ms) * time.Millisecond }

package hostport

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TableName is the name of the hostport table in each family.
const TableName = "svcnet-hostport"

// Names of the shared objects.
const (
	mapHostIP        = "hostip-hostports"
	mapAnyIP         = "hostports"
	mapMasquerade    = "masquerade-pods"
	chainDispatch    = "dispatch"
	chainPrerouting  = "nat-prerouting"
	chainOutput      = "nat-output"
	chainPostrouting = "nat-postrouting"
	chainLocalnet    = "filter-localnet"

	prefixDNAT = "hostport-"
	prefixMasq = "masquerade-"
	hashLen    = 8
	idLen      = 12
)

var (
	keyAddrProtoPort = []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}
	keyProtoPort     = []nft.Field{nft.FieldL4Proto, nft.FieldDport}
	keyAddr          = []nft.Field{nft.FieldDaddr}
	loopback4        = netip.MustParsePrefix("127.0.0.0/8")
)

// ErrConflict is returned (wrapped) when a hostPort is already mapped to
// another attachment.
var ErrConflict = errors.New("hostPort already mapped")

// Owner identifies an attachment of a network: the owner of hostport rules.
// Its fields hold no whitespace (the CNI rules for network names, container
// IDs and interface names), so the comment String writes reads back as the
// same owner.
type Owner struct {
	Network     string
	ContainerID string
	IfName      string
}

// String renders the owner as the comment its rules carry.
func (o Owner) String() string { return o.Network + " " + o.ContainerID + " " + o.IfName }

// parseOwner reads an owner back from a rule comment.
func parseOwner(comment string) (Owner, bool) {
	f := strings.Fields(comment)
	if len(f) != 3 {
		return Owner{}, false
	}
	return Owner{Network: f[0], ContainerID: f[1], IfName: f[2]}, true
}

// ChainNames returns the names of the owner's DNAT and masquerade chains.
func ChainNames(o Owner) (dnat, masq string) {
	sum := sha256.Sum256([]byte(o.Network + "\x00" + o.ContainerID + "\x00" + o.IfName))
	h := base32.StdEncoding.EncodeToString(sum[:])[:hashLen]
	id := o.ContainerID
	if len(id) > idLen {
		id = id[:idLen]
	}
	return prefixDNAT + h + "-" + id, prefixMasq + h + "-" + id
}

// isAttachmentChain reports whether name is an attachment's chain.
func isAttachmentChain(name string) bool {
	return strings.HasPrefix(name, prefixDNAT) || strings.HasPrefix(name, prefixMasq)
}

// Skeleton returns the shared part of family f's table, with empty maps.
func Skeleton(f ipfamily.Family) *nft.Table {
	t := nft.NewTable(f, TableName)
	set := func(s *nft.Set) { s.Elements = map[string]nft.Element{}; t.Sets[s.Name] = s }
	set(&nft.Set{Name: mapHostIP, Key: keyAddrProtoPort, Verdict: true, Comment: "hostPorts bound to one host address"})
	set(&nft.Set{Name: mapAnyIP, Key: keyProtoPort, Verdict: true, Comment: "hostPorts on every local address"})
	set(&nft.Set{Name: mapMasquerade, Key: keyAddr, Verdict: true, Comment: "pods with hostPorts: hairpin and localhost masquerade"})
	chain := func(name string, h *nft.Hook, rules ...*nft.Rule) {
		t.Chains[name] = &nft.Chain{Name: name, Hook: h, Rules: rules}
	}
	chain(chainDispatch, nil,
		nft.R(nft.VMap{Fields: keyAddrProtoPort, Map: mapHostIP}),
		nft.R(nft.FibLocal{}, nft.VMap{Fields: keyProtoPort, Map: mapAnyIP}))
	chain(chainPrerouting, &nft.Hook{Type: "nat", Hook: "prerouting", Priority: -100}, nft.R(nft.JumpTo(chainDispatch)))
	chain(chainOutput, &nft.Hook{Type: "nat", Hook: "output", Priority: -100}, nft.R(nft.JumpTo(chainDispatch)))
	chain(chainPostrouting, &nft.Hook{Type: "nat", Hook: "postrouting", Priority: 100},
		nft.R(nft.VMap{Fields: keyAddr, Map: mapMasquerade}))
	if f == ipfamily.IPv4 {
		chain(chainLocalnet, &nft.Hook{Type: "filter", Hook: "prerouting", Priority: -150},
			nft.R(nft.Daddr(loopback4), nft.AddrMatch{Field: nft.FieldSaddr, Neq: true, Prefix: loopback4}, nft.Verdict{Kind: nft.Drop}).
				WithComment("CVE-2020-8558: only the node reaches 127.0.0.0/8"))
	}
	return t
}

// Objects are one attachment's part of a family's table: its two chains and
// the map elements that lead to them, by map name.
type Objects struct {
	Owner      Owner
	DNAT, Masq *nft.Chain
	Elements   map[string][]nft.Element
}

// Desired returns the objects of owner o in family f for the pod address
// podIP (of family f) and the mappings that apply to f, or nil when none does.
// Rules come in a deterministic order: by host address, protocol, host port.
func Desired(f ipfamily.Family, o Owner, podIP netip.Addr, ms []Mapping) *Objects {
	var mine []Mapping
	for _, m := range ms {
		if m.Applies(f) {
			mine = append(mine, m)
		}
	}
	if len(mine) == 0 || !podIP.IsValid() || familyOf(podIP) != f {
		return nil
	}
	slices.SortFunc(mine, func(a, b Mapping) int {
		return cmp.Or(a.HostIP.Compare(b.HostIP), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.HostPort, b.HostPort), cmp.Compare(a.ContainerPort, b.ContainerPort))
	})
	dn, mn := ChainNames(o)
	obj := &Objects{Owner: o, DNAT: &nft.Chain{Name: dn}, Masq: &nft.Chain{Name: mn}, Elements: map[string][]nft.Element{}}
	comment := o.String()
	seenKey := map[string]bool{}
	seenMasq := map[[2]uint16]bool{}
	for _, m := range mine {
		to := netip.AddrPortFrom(podIP, m.ContainerPort)
		proto, port := nft.ProtoMatch{Proto: m.Protocol}, nft.PortMatch{Field: nft.FieldDport, Port: m.HostPort}
		var el nft.Element
		var mapName string
		if m.HostIP.IsValid() {
			obj.DNAT.Rules = append(obj.DNAT.Rules, nft.R(nft.Daddr(nft.Host(m.HostIP)), proto, port, nft.DNAT{To: to}).WithComment(comment))
			mapName, el = mapHostIP, nft.Element{Key: []nft.Value{nft.A(m.HostIP), nft.N(uint32(m.Protocol)), nft.N(uint32(m.HostPort))}}
		} else {
			obj.DNAT.Rules = append(obj.DNAT.Rules, nft.R(proto, port, nft.DNAT{To: to}).WithComment(comment))
			mapName, el = mapAnyIP, nft.Element{Key: []nft.Value{nft.N(uint32(m.Protocol)), nft.N(uint32(m.HostPort))}}
		}
		el.Verdict = &nft.Verdict{Kind: nft.Goto, Chain: dn}
		if k := mapName + " " + keyOf(f, mapName, el); !seenKey[k] {
			seenKey[k] = true
			obj.Elements[mapName] = append(obj.Elements[mapName], el)
		}
		mk := [2]uint16{uint16(m.Protocol), m.ContainerPort}
		if seenMasq[mk] {
			continue
		}
		seenMasq[mk] = true
		cport := nft.PortMatch{Field: nft.FieldDport, Port: m.ContainerPort}
		obj.Masq.Rules = append(obj.Masq.Rules, nft.R(nft.Saddr(nft.Host(podIP)), proto, cport, nft.Masquerade{}).WithComment(comment))
		if f == ipfamily.IPv4 {
			obj.Masq.Rules = append(obj.Masq.Rules, nft.R(nft.Saddr(loopback4), proto, cport, nft.Masquerade{}).WithComment(comment))
		}
	}
	obj.Elements[mapMasquerade] = []nft.Element{{Key: []nft.Value{nft.A(podIP)}, Verdict: &nft.Verdict{Kind: nft.Goto, Chain: mn}}}
	return obj
}

// keyOf returns an element's key string in map mapName.
func keyOf(f ipfamily.Family, mapName string, e nft.Element) string {
	key := keyAddr
	switch mapName {
	case mapHostIP:
		key = keyAddrProtoPort
	case mapAnyIP:
		key = keyProtoPort
	}
	return nft.KeyString(f, key, e.Key)
}

// AddTx returns the transaction that makes family f's table hold the skeleton
// and exactly obj for its owner, given the table as it is (cur, nil when
// missing). Elements of the owner that obj no longer has are removed. It fails
// without a transaction when one of obj's keys leads to another owner's
// chain, or when a chain of obj's name belongs to another owner (whose
// identity hashes alike: ChainNames): an owner's chains are never another's.
func AddTx(f ipfamily.Family, cur *nft.Table, obj *Objects) (*nft.Tx, error) {
	mine := func(chain string) bool { return chain == obj.DNAT.Name || chain == obj.Masq.Name }
	if cur != nil {
		for _, name := range []string{obj.DNAT.Name, obj.Masq.Name} {
			if o, ok := OwnerOf(cur, name); ok && o != obj.Owner {
				return nil, fmt.Errorf("%w: %s is taken", ErrConflict, describeChain(cur, name))
			}
		}
		for _, mapName := range []string{mapHostIP, mapAnyIP, mapMasquerade} {
			s := cur.Sets[mapName]
			if s == nil {
				continue
			}
			for _, e := range obj.Elements[mapName] {
				old, ok := s.Elements[keyOf(f, mapName, e)]
				if ok && old.Verdict != nil && !mine(old.Verdict.Chain) {
					return nil, fmt.Errorf("%w: %s %s leads to %s", ErrConflict, mapName, keyOf(f, mapName, e), describeChain(cur, old.Verdict.Chain))
				}
			}
		}
	}
	skel := Skeleton(f)
	tx := nft.NewTx(f, TableName)
	tx.AddTable()
	for _, n := range skel.SetNames() {
		tx.AddSet(skel.Sets[n])
	}
	// Regular chains first: base chains' rules jump to them.
	for _, c := range []*nft.Chain{skel.Chains[chainDispatch], obj.DNAT, obj.Masq} {
		tx.AddChain(&nft.Chain{Name: c.Name})
		tx.FlushChain(c.Name)
		for _, r := range c.Rules {
			tx.AddRule(c.Name, r)
		}
	}
	for _, n := range skel.ChainNames() {
		c := skel.Chains[n]
		if c.Hook == nil {
			continue
		}
		tx.AddChain(c)
		tx.FlushChain(n)
		for _, r := range c.Rules {
			tx.AddRule(n, r)
		}
	}
	for _, mapName := range []string{mapHostIP, mapAnyIP, mapMasquerade} {
		want := map[string]nft.Element{}
		for _, e := range obj.Elements[mapName] {
			want[keyOf(f, mapName, e)] = e
		}
		var have map[string]nft.Element
		if cur != nil && cur.Sets[mapName] != nil {
			have = cur.Sets[mapName].Elements
		}
		var del, add []nft.Element
		for _, k := range sortedKeys(have) {
			e := have[k]
			if e.Verdict != nil && mine(e.Verdict.Chain) {
				if w, ok := want[k]; !ok || w.Verdict.Chain != e.Verdict.Chain {
					del = append(del, e)
				}
			}
		}
		for _, k := range sortedKeys(want) {
			if e, ok := have[k]; ok && e.Verdict != nil && e.Verdict.Chain == want[k].Verdict.Chain && e.Verdict.Kind == want[k].Verdict.Kind {
				continue
			}
			add = append(add, want[k])
		}
		tx.DeleteElements(mapName, del...)
		tx.AddElements(mapName, add...)
	}
	return tx, nil
}

// RemoveTx returns the transaction that removes the chains stale reports
// (attachment chains only) and every map element leading to them, from the
// table as it is (cur; nil: nothing to do). The transaction may be empty.
func RemoveTx(f ipfamily.Family, cur *nft.Table, stale func(chain string) bool) *nft.Tx {
	tx := nft.NewTx(f, TableName)
	if cur == nil {
		return tx
	}
	for _, mapName := range []string{mapHostIP, mapAnyIP, mapMasquerade} {
		s := cur.Sets[mapName]
		if s == nil {
			continue
		}
		var del []nft.Element
		for _, k := range sortedKeys(s.Elements) {
			if e := s.Elements[k]; e.Verdict != nil && stale(e.Verdict.Chain) {
				del = append(del, e)
			}
		}
		tx.DeleteElements(mapName, del...)
	}
	for _, n := range cur.ChainNames() {
		if isAttachmentChain(n) && stale(n) {
			tx.DeleteChain(n)
		}
	}
	return tx
}

// OwnedBy returns whether a chain of t is owner o's: its rules' comment
// names o, or, when it has no rule to say (a chain flushed by hand), its name
// is one of o's (ChainNames). A chain of o's name whose comment names another
// owner is not o's.
func OwnedBy(t *nft.Table, o Owner) func(chain string) bool {
	dn, mn := ChainNames(o)
	return func(chain string) bool {
		if t == nil || !isAttachmentChain(chain) {
			return false
		}
		if have, ok := OwnerOf(t, chain); ok {
			return have == o
		}
		return chain == dn || chain == mn
	}
}

// OwnerOf returns the owner recorded in the comments of chain name of t.
func OwnerOf(t *nft.Table, name string) (Owner, bool) {
	c := t.Chains[name]
	if c == nil || len(c.Rules) == 0 {
		return Owner{}, false
	}
	return parseOwner(c.Rules[0].Comment)
}

// StaleChains returns the attachment chains of network in t whose owner valid
// rejects, sorted. Chains of other networks, and chains whose owner cannot be
// read, are not judged.
func StaleChains(t *nft.Table, network string, valid func(Owner) bool) []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, n := range t.ChainNames() {
		if !isAttachmentChain(n) {
			continue
		}
		if o, ok := OwnerOf(t, n); ok && o.Network == network && !valid(o) {
			out = append(out, n)
		}
	}
	return out
}

// Diff describes how family f's table t differs from holding the skeleton and
// exactly obj (nil: no objects of owner o). It returns "" when nothing differs.
func Diff(f ipfamily.Family, t *nft.Table, o Owner, obj *Objects) string {
	dn, mn := ChainNames(o)
	if obj == nil {
		if t == nil {
			return ""
		}
		var extra []string
		for _, n := range []string{dn, mn} {
			if t.Chains[n] != nil {
				extra = append(extra, "chain "+n+" exists")
			}
		}
		return strings.Join(extra, "; ")
	}
	if t == nil {
		return fmt.Sprintf("table %s %s is missing", nft.Keyword(f), TableName)
	}
	var diffs []string
	want := Skeleton(f)
	for _, n := range want.ChainNames() {
		if d := diffChain(f, t.Chains[n], want.Chains[n]); d != "" {
			diffs = append(diffs, d)
		}
	}
	for _, c := range []*nft.Chain{obj.DNAT, obj.Masq} {
		if d := diffChain(f, t.Chains[c.Name], c); d != "" {
			diffs = append(diffs, d)
		}
	}
	for _, mapName := range []string{mapHostIP, mapAnyIP, mapMasquerade} {
		s := t.Sets[mapName]
		if s == nil {
			diffs = append(diffs, "map "+mapName+" is missing")
			continue
		}
		want := map[string]bool{}
		for _, e := range obj.Elements[mapName] {
			k := keyOf(f, mapName, e)
			want[k] = true
			if got, ok := s.Elements[k]; !ok || got.Verdict == nil || got.Verdict.String() != e.Verdict.String() {
				diffs = append(diffs, fmt.Sprintf("map %s lacks %s : %s", mapName, k, e.Verdict))
			}
		}
		for _, k := range sortedKeys(s.Elements) {
			if e := s.Elements[k]; !want[k] && e.Verdict != nil && (e.Verdict.Chain == dn || e.Verdict.Chain == mn) {
				diffs = append(diffs, fmt.Sprintf("map %s has extra %s : %s", mapName, k, e.Verdict))
			}
		}
	}
	return strings.Join(diffs, "; ")
}

func diffChain(f ipfamily.Family, got, want *nft.Chain) string {
	if got == nil {
		return "chain " + want.Name + " is missing"
	}
	if (got.Hook == nil) != (want.Hook == nil) || got.Hook != nil && *got.Hook != *want.Hook {
		return "chain " + want.Name + " has the wrong hook"
	}
	g, w := renderRules(f, got.Rules), renderRules(f, want.Rules)
	if !slices.Equal(g, w) {
		return fmt.Sprintf("chain %s has rules %q, want %q", want.Name, g, w)
	}
	return ""
}

func renderRules(f ipfamily.Family, rs []*nft.Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Render(f)
	}
	return out
}

// describeChain names a chain and, when known, its owner.
func describeChain(t *nft.Table, name string) string {
	if o, ok := OwnerOf(t, name); ok {
		return fmt.Sprintf("chain %s (network %s, container %s, interface %s)", name, o.Network, o.ContainerID, o.IfName)
	}
	return "chain " + name
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

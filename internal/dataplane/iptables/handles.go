package iptables

import (
	"fmt"
	"strings"

	"github.com/svcnet/svcnet/internal/nft"
)

// AdoptHandles gives the translated table t the kernel's handles of the same
// table as iptables-nft stores it (k: read back over netlink, whatever its
// rules' expressions): the table's handle (the simulator orders base chains
// of equal priority by it) and, chain by chain, each rule's handle in order
// (trace events name rules by handle). It fails when a chain's rules differ
// in number: the tables changed between the two reads. An empty built-in
// chain the kernel does not have is removed: iptables-save prints every
// built-in chain, but iptables-nft registers one only once a rule or a
// policy needs it, and the packet meets only those registered.
func AdoptHandles(t, k *nft.Table) error {
	t.Handle = k.Handle
	for name, c := range t.Chains {
		kc := k.Chains[name]
		if kc == nil && c.Hook != nil && len(c.Rules) == 0 {
			delete(t.Chains, name)
			continue
		}
		var handles []uint64
		if kc != nil {
			for _, r := range kc.Rules {
				if r.Handle != 0 {
					handles = append(handles, r.Handle)
				}
			}
		}
		n := 0
		for _, r := range c.Rules {
			if !strings.HasPrefix(r.Source, ":") {
				n++
			}
		}
		if n != len(handles) {
			return fmt.Errorf("table %s %s chain %s: %d rules in iptables-save, %d in the kernel's nf_tables table: it changed between the reads", nft.Keyword(t.Family), t.Name, name, n, len(handles))
		}
		i := 0
		for _, r := range c.Rules {
			if !strings.HasPrefix(r.Source, ":") {
				r.Handle = handles[i]
				i++
			}
		}
	}
	return nil
}

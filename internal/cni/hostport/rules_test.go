package hostport

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/goldentest"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

var (
	ownerA = Owner{Network: "svcnet", ContainerID: "0123456789abcdef0123", IfName: "eth0"}
	ownerB = Owner{Network: "svcnet", ContainerID: "feedfacecafe", IfName: "eth0"}
	podA   = []netip.Addr{netip.MustParseAddr("192.168.1.2"), netip.MustParseAddr("fd00:192:168:1::2")}
	podB   = []netip.Addr{netip.MustParseAddr("192.168.1.3"), netip.MustParseAddr("fd00:192:168:1::3")}
	mapsA  = []Mapping{
		{HostPort: 8080, Protocol: nft.ProtoTCP, ContainerPort: 80},
		{HostPort: 5353, Protocol: nft.ProtoUDP, ContainerPort: 53},
		{HostIP: netip.MustParseAddr("172.26.236.177"), HostPort: 9090, Protocol: nft.ProtoTCP, ContainerPort: 80},
		{HostIP: netip.MustParseAddr("fd00:26:236::177"), HostPort: 9191, Protocol: nft.ProtoSCTP, ContainerPort: 9000},
	}
)

func ctx() context.Context { return context.Background() }

func render(t *testing.T, k *nft.Fake, f ipfamily.Family) string {
	t.Helper()
	tab, err := k.Read(ctx(), f, TableName)
	if err != nil {
		return ""
	}
	return tab.Render()
}

func TestChainNames(t *testing.T) {
	d, m := ChainNames(ownerA)
	if !strings.HasPrefix(d, "hostport-") || !strings.HasSuffix(d, "-0123456789ab") || len(d) != len("hostport-")+8+1+12 {
		t.Fatalf("dnat chain %q", d)
	}
	if m != "masquerade-"+strings.TrimPrefix(d, "hostport-") {
		t.Fatalf("masquerade chain %q does not match %q", m, d)
	}
	d2, _ := ChainNames(Owner{Network: "svcnet", ContainerID: ownerA.ContainerID, IfName: "eth1"})
	d3, _ := ChainNames(Owner{Network: "other", ContainerID: ownerA.ContainerID, IfName: "eth0"})
	if d2 == d || d3 == d {
		t.Fatalf("names do not depend on the whole owner: %s %s %s", d, d2, d3)
	}
	if again, _ := ChainNames(ownerA); again != d {
		t.Fatal("names are not deterministic")
	}
}

// The rendered tables after two attachments are added: golden files.
func TestAddRendersGolden(t *testing.T) {
	k := nft.NewFake()
	m := NewManager(k)
	if err := m.Add(ctx(), ownerA, podA, mapsA); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(ctx(), ownerB, podB[:1], []Mapping{{HostPort: 8081, Protocol: nft.ProtoTCP, ContainerPort: 8081}}); err != nil {
		t.Fatal(err)
	}
	goldentest.Check(t, "two-pods.ip.nft", render(t, k, ipfamily.IPv4))
	goldentest.Check(t, "two-pods.ip6.nft", render(t, k, ipfamily.IPv6))
	if err := m.Check(ctx(), ownerA, podA, mapsA); err != nil {
		t.Fatalf("Check after Add: %v", err)
	}
	// Adding again changes nothing.
	before := render(t, k, ipfamily.IPv4) + render(t, k, ipfamily.IPv6)
	if err := m.Add(ctx(), ownerA, podA, mapsA); err != nil {
		t.Fatal(err)
	}
	if after := render(t, k, ipfamily.IPv4) + render(t, k, ipfamily.IPv6); after != before {
		t.Fatalf("repeated Add changed the tables:\n%s", after)
	}
}

func TestConflictNamesTheOtherOwner(t *testing.T) {
	k := nft.NewFake()
	m := NewManager(k)
	if err := m.Add(ctx(), ownerA, podA, mapsA); err != nil {
		t.Fatal(err)
	}
	before := render(t, k, ipfamily.IPv4)
	err := m.Add(ctx(), ownerB, podB, []Mapping{{HostPort: 8080, Protocol: nft.ProtoTCP, ContainerPort: 80}})
	if err == nil || !strings.Contains(err.Error(), "container 0123456789abcdef0123") || !strings.Contains(err.Error(), "tcp . 8080") {
		t.Fatalf("conflicting Add: %v", err)
	}
	if render(t, k, ipfamily.IPv4) != before {
		t.Fatal("a failed Add changed the table")
	}
	// The same port on another protocol is no conflict.
	if err := m.Add(ctx(), ownerB, podB, []Mapping{{HostPort: 8080, Protocol: nft.ProtoUDP, ContainerPort: 80}}); err != nil {
		t.Fatal(err)
	}
}

// Re-adding with fewer mappings drops the old elements and rules.
func TestAddReplacesOwnMappings(t *testing.T) {
	k := nft.NewFake()
	m := NewManager(k)
	if err := m.Add(ctx(), ownerA, podA, mapsA); err != nil {
		t.Fatal(err)
	}
	fewer := mapsA[:1]
	if err := m.Add(ctx(), ownerA, podA, fewer); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(ctx(), ownerA, podA, fewer); err != nil {
		t.Fatalf("Check after shrinking: %v", err)
	}
	if s := render(t, k, ipfamily.IPv4); strings.Contains(s, "5353") || strings.Contains(s, "9090") {
		t.Fatalf("stale mappings left:\n%s", s)
	}
	// No mapping at all: the owner's objects go, the skeleton stays.
	if err := m.Add(ctx(), ownerA, podA, nil); err != nil {
		t.Fatal(err)
	}
	dn, _ := ChainNames(ownerA)
	if s := render(t, k, ipfamily.IPv4); strings.Contains(s, dn) || strings.Contains(s, "192.168.1.2") {
		t.Fatalf("objects left after Add without mappings:\n%s", s)
	}
}

func TestRemoveAndGC(t *testing.T) {
	k := nft.NewFake()
	m := NewManager(k)
	other := Owner{Network: "other", ContainerID: "c0ffee", IfName: "eth0"}
	for _, c := range []struct {
		o   Owner
		ips []netip.Addr
		ms  []Mapping
	}{
		{ownerA, podA, mapsA},
		{ownerB, podB, []Mapping{{HostPort: 8081, Protocol: nft.ProtoTCP, ContainerPort: 81}}},
		{other, []netip.Addr{netip.MustParseAddr("10.1.0.2")}, []Mapping{{HostPort: 8082, Protocol: nft.ProtoTCP, ContainerPort: 82}}},
	} {
		if err := m.Add(ctx(), c.o, c.ips, c.ms); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Remove(ctx(), ownerA); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx(), ownerA); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	for _, f := range families {
		if s := render(t, k, f); strings.Contains(s, ownerA.ContainerID) || strings.Contains(s, "8080") {
			t.Fatalf("%s: owner A left traces:\n%s", f, s)
		}
	}
	if err := m.Check(ctx(), ownerB, podB, []Mapping{{HostPort: 8081, Protocol: nft.ProtoTCP, ContainerPort: 81}}); err != nil {
		t.Fatalf("Remove of A disturbed B: %v", err)
	}
	// GC of network "svcnet" with nothing valid removes B, never the other network's.
	removed, err := m.GC(ctx(), "svcnet", func(Owner) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 4 { // B's two chains in two families
		t.Fatalf("GC removed %v", removed)
	}
	s := render(t, k, ipfamily.IPv4)
	if strings.Contains(s, ownerB.ContainerID) || !strings.Contains(s, "c0ffee") {
		t.Fatalf("after GC:\n%s", s)
	}
	// GC keeps what is valid.
	removed, err = m.GC(ctx(), "other", func(o Owner) bool { return o == other })
	if err != nil || len(removed) != 0 {
		t.Fatalf("GC of a valid attachment removed %v, %v", removed, err)
	}
}

func TestCheckReportsDrift(t *testing.T) {
	k := nft.NewFake()
	m := NewManager(k)
	if err := m.Check(ctx(), ownerA, podA, mapsA); err == nil || !strings.Contains(err.Error(), "table ip svcnet-hostport is missing") {
		t.Fatalf("Check without a table: %v", err)
	}
	if err := m.Add(ctx(), ownerA, podA, mapsA); err != nil {
		t.Fatal(err)
	}
	dn, _ := ChainNames(ownerA)
	// The rules read back carry the kernel's handles, which are no drift.
	if got, _ := k.Read(ctx(), ipfamily.IPv4, TableName); len(got.Chains[dn].Rules) == 0 || got.Chains[dn].Rules[0].Handle == 0 {
		t.Fatalf("chain %s read back without rule handles", dn)
	}
	if err := m.Check(ctx(), ownerA, podA, mapsA); err != nil {
		t.Fatalf("Check right after Add: %v", err)
	}
	k.Mutate(ipfamily.IPv4, TableName, func(t *nft.Table) *nft.Table {
		t.Chains[dn].Rules = t.Chains[dn].Rules[1:]
		delete(t.Sets[mapMasquerade].Elements, "192.168.1.2")
		return t
	})
	err := m.Check(ctx(), ownerA, podA, mapsA)
	if err == nil || !strings.Contains(err.Error(), "chain "+dn+" has rules") || !strings.Contains(err.Error(), "map masquerade-pods lacks 192.168.1.2") {
		t.Fatalf("Check after drift: %v", err)
	}
	if err := m.Check(ctx(), ownerB, podB, nil); err != nil {
		t.Fatalf("Check of an owner without mappings: %v", err)
	}
}

func TestParseProtocol(t *testing.T) {
	for in, want := range map[string]uint8{"": nft.ProtoTCP, "TCP": nft.ProtoTCP, "udp": nft.ProtoUDP, "Sctp": nft.ProtoSCTP} {
		if got, err := ParseProtocol(in); err != nil || got != want {
			t.Errorf("ParseProtocol(%q) = %d, %v", in, got, err)
		}
	}
	if _, err := ParseProtocol("icmp"); err == nil {
		t.Error("icmp accepted")
	}
	if s := mapsA[2].String(); s != "172.26.236.177:9090/tcp->80" {
		t.Errorf("String = %q", s)
	}
}

// objectsUnder returns o's objects in family f renamed to the chains of
// other: what the table holds when two identities hash alike.
func objectsUnder(f ipfamily.Family, o, other Owner, podIP netip.Addr, ms []Mapping) *Objects {
	obj := Desired(f, o, podIP, ms)
	dn, mn := ChainNames(other)
	rename := map[string]string{obj.DNAT.Name: dn, obj.Masq.Name: mn}
	obj.DNAT.Name, obj.Masq.Name = dn, mn
	for _, els := range obj.Elements {
		for i := range els {
			v := *els[i].Verdict
			v.Chain = rename[v.Chain]
			els[i].Verdict = &v
		}
	}
	return obj
}

// Chain names carry a 40-bit hash, so two identities may share them; the
// owner in the rules' comments tells them apart. The second owner is
// refused, and neither Remove nor GC of it touches the first owner's chains.
func TestChainNameCollisionNeverCrossesOwners(t *testing.T) {
	k := nft.NewFake()
	m := NewManager(k)
	first := ownerB
	ms := []Mapping{{HostPort: 8081, Protocol: nft.ProtoTCP, ContainerPort: 81}}
	for i, f := range families {
		tx, err := AddTx(f, nil, objectsUnder(f, first, ownerA, podB[i], ms))
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Apply(ctx(), tx); err != nil {
			t.Fatal(err)
		}
	}
	before := render(t, k, ipfamily.IPv4) + render(t, k, ipfamily.IPv6)
	dn, _ := ChainNames(ownerA)
	if !strings.Contains(before, dn) || !strings.Contains(before, first.ContainerID) {
		t.Fatalf("setup: %s", before)
	}

	err := m.Add(ctx(), ownerA, podA, mapsA)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "chain "+dn+" (network svcnet, container feedfacecafe, interface eth0) is taken") {
		t.Fatalf("Add under a taken chain name: %v", err)
	}
	if err := m.Add(ctx(), ownerA, podA, nil); err != nil {
		t.Fatalf("Add without mappings: %v", err)
	}
	if err := m.Remove(ctx(), ownerA); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GC(ctx(), "svcnet", func(o Owner) bool { return o == first }); err != nil {
		t.Fatal(err)
	}
	if after := render(t, k, ipfamily.IPv4) + render(t, k, ipfamily.IPv6); after != before {
		t.Fatalf("the other owner's objects changed:\n--- before\n%s\n--- after\n%s", before, after)
	}
	// Its own Remove, by comment, takes them away although the names are not its.
	if err := m.Remove(ctx(), first); err != nil {
		t.Fatal(err)
	}
	if after := render(t, k, ipfamily.IPv4) + render(t, k, ipfamily.IPv6); strings.Contains(after, dn) || strings.Contains(after, "8081") {
		t.Fatalf("after Remove of the owner:\n%s", after)
	}
}

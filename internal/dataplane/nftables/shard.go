package nftables

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Why shards. nf_tables validates a table's whole jump graph on every commit
// that adds a rule or a jump/goto verdict to it: every chain reachable from
// each base chain, through every element of every verdict map, is walked
// again (nf_tables_validate, kernel 6.x). One table holding the chains of 10k
// Services therefore costs tens of ms of kernel time per one-Service change,
// whatever its size. So the Service NAT lives in K shard tables
// (svcnet-nat-00 …): each has its own nat base chains, dispatch maps and the
// chains of the Service ports that hash to it, and a change validates only
// its shard. The main table `svcnet` keeps what is not per-Service NAT: the
// filter chains (source ranges, no endpoints, unknown ClusterIP ports) with
// their maps, and the masquerade in postrouting.
//
// The price is K nat base chains per hook, each one jump and two lookups
// (the dispatch map and the NodePort addresses), met by the first packet of
// every connection (nat chains see only new conntracks): a connection to no
// Service, as to a pod IP, runs all K on each node it crosses. So K is kept
// as small as the commit budget allows. Measured at 10k Service ports on
// kernel 6.18, 2 vCPUs: the commit by BenchmarkKernelChange (p50 of 30 adds,
// two runs; K=2 and K=8 one run with the count set by hand), the connect by
// BenchmarkKernelShardConnect (its excess over K=1, p50 of 4000 connects
// each, three runs):
//
//	K                          1        2         4         8         16
//	commit of one change, p50  43..58   27        8.8..12.2 6.2       3.4..4.1 ms
//	connect to a pod, over K=1 0        -0.3..2.5 -0.1..2.5 2.6..4.0  5.0..7.2 µs a node
//
// portsPerShard puts 10k ports in 4 shards (2500 each): a commit of ~10 ms
// (p99 13-20 ms), well inside the 50 ms a change may take, for about 1 µs a
// node on a new connection, where 16 shards cost about 6. The count is the
// power of two nearest above n/portsPerShard, at most maxShards; keepShards
// lets a shard grow to twice that (~25 ms a commit) before the layout changes.
const (
	// ShardPrefix starts the name of every shard table.
	ShardPrefix   = TableName + "-nat-"
	portsPerShard = 2560
	maxShards     = 64
)

// ShardTable returns the name of shard i.
func ShardTable(i int) string { return fmt.Sprintf("%s%02d", ShardPrefix, i) }

// IsTable reports whether a table of this name is svcnet's proxy's: the main
// table or a shard. Cleanup and the tracer find them by it.
func IsTable(name string) bool {
	if name == TableName {
		return true
	}
	n, ok := strings.CutPrefix(name, ShardPrefix)
	if !ok || len(n) < 2 {
		return false
	}
	i, err := strconv.Atoi(n)
	return err == nil && i >= 0 && i < maxShards && ShardTable(i) == name
}

// shardsFor returns the shard count for n Service ports of one family: the
// power of two nearest above n/portsPerShard, at least 1, at most maxShards.
func shardsFor(n int) int {
	k := 1
	for k < maxShards && k*portsPerShard < n {
		k *= 2
	}
	return k
}

// keepShards reports whether k shards still suit n ports: a sync reshards
// (one full sync, moving every port) only when the ports per shard leave
// [portsPerShard/4, portsPerShard*2], so growing or shrinking by one Service
// never flips the layout back and forth.
func keepShards(k, n int) bool {
	if k < 1 || k > maxShards {
		return false
	}
	if n > 2*portsPerShard*k && k < maxShards {
		return false
	}
	return k == 1 || n >= portsPerShard/4*k
}

// shardOf returns the shard of a Service port: a hash of its ID, so it stays
// put while the shard count does.
func shardOf(id string, k int) int {
	if k <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(k))
}

// mainSets are the sets and maps of the main table that fragments put
// elements in; every other set of a fragment is the shard's.
var mainSets = map[string]bool{
	mapFirewallIPs:         true,
	mapNoEndpointServices:  true,
	mapNoEndpointNodePorts: true,
}

// skeletonSets are the sets every skeleton (main or shard) defines:
// fragments only add elements to them, never create or delete them.
var skeletonSets = map[string]bool{
	mapServiceIPs:          true,
	mapServiceNodePorts:    true,
	mapFirewallIPs:         true,
	mapNoEndpointServices:  true,
	mapNoEndpointNodePorts: true,
	setClusterIPs:          true,
	setNodePortIPs:         true,
}

func fragmentOwns(set string) bool { return !skeletonSets[set] }

// split divides a Service port's fragment between the main table (firewall
// chains and elements of the filter maps) and its shard (all the rest). The
// parts share the fragment's chains, sets and elements.
func split(fr *fragment, shard string) (mainPart, shardPart *nft.Table) {
	mainPart = nft.NewTable(fr.Family, TableName)
	shardPart = nft.NewTable(fr.Family, shard)
	for n, c := range fr.Chains {
		if strings.HasPrefix(n, "firewall-") {
			mainPart.Chains[n] = c
		} else {
			shardPart.Chains[n] = c
		}
	}
	for n, s := range fr.Sets {
		if mainSets[n] {
			mainPart.Sets[n] = s
		} else {
			shardPart.Sets[n] = s
		}
	}
	return mainPart, shardPart
}

// layout is the set of physical tables of one family: the main table and k
// shards, by name.
type layout struct {
	fc     familyConfig
	shards int
	tables map[string]*nft.Table
}

// newLayout returns the skeletons of the main table (with the ClusterIPs) and
// of k shards.
func newLayout(fc familyConfig, k int, clusterIPs []netip.Addr) *layout {
	l := &layout{fc: fc, shards: k, tables: map[string]*nft.Table{TableName: renderMain(fc, clusterIPs)}}
	for i := 0; i < k; i++ {
		l.tables[ShardTable(i)] = renderShard(fc, ShardTable(i))
	}
	return l
}

// add merges a Service port's fragment into the layout's tables (which must
// be private copies).
func (l *layout) add(sp *servicetable.ServicePort, fr *fragment) {
	m, s := split(fr, ShardTable(shardOf(sp.ID, l.shards)))
	merge(l.tables[TableName], m)
	merge(l.tables[s.Name], s)
}

// sorted returns the tables in name order (the main table first).
func (l *layout) sorted() []*nft.Table {
	out := make([]*nft.Table, 0, len(l.tables))
	for _, n := range slices.Sorted(maps.Keys(l.tables)) {
		out = append(out, l.tables[n])
	}
	return out
}

// batch collects one Tx per table of a family, applied together as one
// atomic transaction.
type batch struct {
	family ipfamily.Family
	txs    map[string]*nft.Tx
}

func newBatch(f ipfamily.Family) *batch { return &batch{family: f, txs: map[string]*nft.Tx{}} }

// tx returns the transaction of table name, starting it if needed.
func (b *batch) tx(name string) *nft.Tx {
	tx := b.txs[name]
	if tx == nil {
		tx = nft.NewTx(b.family, name)
		b.txs[name] = tx
	}
	return tx
}

// deletesFirst moves the element deletions of each transaction ahead of its
// other operations, in their order. A partial sync diffs each changed
// Service port on its own, so a port that gives up a frontend (a ClusterIP,
// NodePort, externalIP or LoadBalancer IP with its port) and another that
// takes it in the same sync would add the key before the first deletes it:
// the kernel refuses a key that exists with another verdict (EEXIST), and
// the sync fails. Deleting an element earlier is always safe: a frontend's
// key belongs to one port at a time (the service table's claims), shared
// sets are counted apart (cipDelta), and nothing added needs an element
// deleted.
func (b *batch) deletesFirst() {
	for _, tx := range b.txs {
		slices.SortStableFunc(tx.Ops, func(x, y nft.Op) int {
			return cmp.Compare(opRank(x.Kind), opRank(y.Kind))
		})
	}
}

func opRank(k nft.OpKind) int {
	if k == nft.OpDeleteElements {
		return 0
	}
	return 1
}

// list returns the non-empty transactions in table-name order.
func (b *batch) list() []*nft.Tx {
	var out []*nft.Tx
	for _, n := range slices.Sorted(maps.Keys(b.txs)) {
		if b.txs[n].Len() > 0 {
			out = append(out, b.txs[n])
		}
	}
	return out
}

// Len returns the number of operations over all tables.
func (b *batch) Len() int {
	n := 0
	for _, tx := range b.txs {
		n += tx.Len()
	}
	return n
}

package netlink

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	mnl "github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
)

// BenchmarkWire prices the three ways svcnet could speak nf_tables, on the
// same transaction (TestScale's table: N Services, each a service chain,
// two endpoint chains, seven rules and a verdict map element) in throwaway
// namespaces, in the same run:
//
//   - svcnet: this package's Conn (one batch in one datagram, no
//     acknowledgements, a GETGEN fence; Read: one dump per object kind).
//   - google: github.com/google/nftables' Conn with the same kernel
//     expressions (compileRule) and element bytes. It asks for an
//     acknowledgement of every message and reads them one by one, and its
//     read-back dumps rules one chain at a time. With the system's default
//     socket buffers its batch does not fit the send buffer (logged); the
//     figures are with buffers sized for batch and acknowledgements.
//   - nft: `nft -f` of the rendered table, and `nft -j list table` parsed
//     as JSON, as sigs.k8s.io/knftables does (it runs nft(8)).
//
// Each side commits the table once and reads it back once; the metrics are
// seconds and the ratios other/svcnet. The package doc quotes a run.
//
//	SVCNET_REQUIRE_ROOT=1 go test -run '^$' -bench Wire -benchtime 1x ./internal/nft/netlink
func BenchmarkWire(b *testing.B) {
	for _, n := range []int{1000, scaleServices} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for range b.N {
				benchWire(b, n)
			}
		})
	}
}

// wireSide is one way's figures; err is set when it failed.
type wireSide struct {
	commit, read time.Duration
	err          error
}

func benchWire(b *testing.B, n int) {
	ctx := context.Background()
	tx := nft.NewTx(ipfamily.IPv4, "svcnet")
	scaleSkeleton(tx)
	for i := range n {
		scaleService(tx, i)
	}
	wantChains := 6 + 3*n
	wantRules := 8 + 7*n

	// svcnet.
	var mine wireSide
	{
		ns := netnstest.New(b, "nlwire")
		c, err := New(ns)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if err := c.Apply(ctx, tx); err != nil {
			b.Fatal(err)
		}
		mine.commit = time.Since(start)
		start = time.Now()
		got, err := c.Read(ctx, ipfamily.IPv4, "svcnet")
		if err != nil {
			b.Fatal(err)
		}
		mine.read = time.Since(start)
		rules := 0
		for _, ch := range got.Chains {
			rules += len(ch.Rules)
		}
		if len(got.Chains) != wantChains || rules != wantRules || len(got.Sets["service-ips"].Elements) != n {
			b.Fatalf("svcnet read back %d chains, %d rules, %d elements; want %d, %d, %d",
				len(got.Chains), rules, len(got.Sets["service-ips"].Elements), wantChains, wantRules, n)
		}
	}

	// google/nftables, as it comes (its socket buffers are the system's
	// defaults), then with buffers sized for the batch and its
	// acknowledgements.
	google := googleWire(b, tx, wantChains, wantRules, n, false)
	tuned := googleWire(b, tx, wantChains, wantRules, n, true)

	// nft -f, nft -j list.
	var text wireSide
	{
		ns := netnstest.New(b, "nlwirenft")
		fake := nft.NewFake()
		if err := fake.Apply(ctx, tx); err != nil {
			b.Fatal(err)
		}
		t, _ := fake.Read(ctx, ipfamily.IPv4, "svcnet")
		script := strings.ReplaceAll(t.Render(), "hook output priority dstnat", "hook output priority -100")
		start := time.Now()
		cmd := ns.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("nft -f: %v\n%s", err, out)
		}
		text.commit = time.Since(start)
		start = time.Now()
		out, err := ns.Command("nft", "-j", "list", "table", "ip", "svcnet").Output()
		if err != nil {
			b.Fatalf("nft -j list: %v", err)
		}
		var doc struct {
			Nftables []map[string]json.RawMessage `json:"nftables"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			b.Fatal(err)
		}
		chains, rules := 0, 0
		for _, o := range doc.Nftables {
			var v any
			if raw, ok := o["rule"]; ok {
				rules++
				err = json.Unmarshal(raw, &v)
			} else if raw, ok := o["chain"]; ok {
				chains++
				err = json.Unmarshal(raw, &v)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		text.read = time.Since(start)
		if chains != wantChains || rules != wantRules {
			b.Fatalf("nft -j read back %d chains, %d rules; want %d, %d", chains, rules, wantChains, wantRules)
		}
	}

	b.ReportMetric(mine.commit.Seconds(), "svcnet-commit-s")
	b.ReportMetric(mine.read.Seconds(), "svcnet-read-s")
	b.ReportMetric(text.commit.Seconds(), "nft-commit-s")
	b.ReportMetric(text.read.Seconds(), "nft-read-s")
	b.ReportMetric(text.commit.Seconds()/mine.commit.Seconds(), "nft/svcnet-commit")
	b.ReportMetric(text.read.Seconds()/mine.read.Seconds(), "nft/svcnet-read")
	if google.err != nil {
		b.Logf("%d services: google/nftables with default socket buffers failed: %v", n, google.err)
	}
	if tuned.err != nil {
		b.Fatalf("%d services: google/nftables with large socket buffers failed: %v", n, tuned.err)
	}
	b.ReportMetric(tuned.commit.Seconds(), "google-commit-s")
	b.ReportMetric(tuned.read.Seconds(), "google-read-s")
	b.ReportMetric(tuned.commit.Seconds()/mine.commit.Seconds(), "google/svcnet-commit")
	b.ReportMetric(tuned.read.Seconds()/mine.read.Seconds(), "google/svcnet-read")
	b.Logf("%d services (%d chains, %d rules, %d elements): commit svcnet %v, google/nftables %v, nft -f %v; read back svcnet %v, google/nftables %v, nft -j list %v",
		n, wantChains, wantRules, n, mine.commit, tuned.commit, text.commit, mine.read, tuned.read, text.read)
}

// googleBuffers is the size of both socket buffers of the tuned
// google/nftables Conn: room for the batch and for all its
// acknowledgements, which the kernel queues before Flush reads the first.
const googleBuffers = 256 << 20

// bigBuffers sets a netlink socket's send and receive buffers to
// googleBuffers (the FORCE options pass the system's maxima; root).
func bigBuffers(c *mnl.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
			if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, googleBuffers); err != nil {
				serr = err
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// googleWire commits tx through google/nftables' Conn (with tune, its
// socket buffers set by bigBuffers), with the kernel
// expressions and element keys this package compiles, and reads the table
// back with its API (chains, then each chain's rules, sets, elements).
func googleWire(b *testing.B, tx *nft.Tx, wantChains, wantRules, wantElems int, tune bool) wireSide {
	ns := netnstest.New(b, "nlwiregoogle")
	opts := []nftables.ConnOption{nftables.AsLasting()}
	if tune {
		opts = append(opts, nftables.WithSockOptions(bigBuffers))
	}
	var c *nftables.Conn
	if err := ns.Do(func() (err error) {
		c, err = nftables.New(opts...)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer c.CloseLasting()
	start := time.Now()
	gt, err := googleTx(c, tx)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		return wireSide{err: fmt.Errorf("flush after %v: %w", time.Since(start), err)}
	}
	var s wireSide
	s.commit = time.Since(start)

	start = time.Now()
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return wireSide{err: fmt.Errorf("list chains: %w", err)}
	}
	nchains, rules := 0, 0
	for _, ch := range chains {
		if ch.Table.Name != gt.Name {
			continue
		}
		nchains++
		rs, err := c.GetRules(gt, ch)
		if err != nil {
			return wireSide{err: fmt.Errorf("rules of chain %s: %w", ch.Name, err)}
		}
		rules += len(rs)
	}
	sets, err := c.GetSets(gt)
	if err != nil {
		return wireSide{err: fmt.Errorf("sets: %w", err)}
	}
	elems := 0
	for _, set := range sets {
		els, err := c.GetSetElements(set)
		if err != nil {
			return wireSide{err: fmt.Errorf("elements of %s: %w", set.Name, err)}
		}
		elems += len(els)
	}
	s.read = time.Since(start)
	if nchains != wantChains || rules != wantRules || elems != wantElems {
		b.Fatalf("google/nftables read back %d chains, %d rules, %d elements; want %d, %d, %d",
			nchains, rules, elems, wantChains, wantRules, wantElems)
	}
	return s
}

// googleHooks maps the model's hooks to google/nftables'.
var googleHooks = map[string]*nftables.ChainHook{
	"prerouting":  nftables.ChainHookPrerouting,
	"input":       nftables.ChainHookInput,
	"forward":     nftables.ChainHookForward,
	"output":      nftables.ChainHookOutput,
	"postrouting": nftables.ChainHookPostrouting,
}

// googleTx queues tx's table, set, chain, rule and element additions on c.
func googleTx(c *nftables.Conn, tx *nft.Tx) (*nftables.Table, error) {
	t := &nftables.Table{Name: tx.Table, Family: nftables.TableFamily(tx.Family.Proto())}
	sets := map[string]*nftables.Set{}
	layouts := map[string]keyLayout{}
	for _, op := range tx.Ops {
		switch op.Kind {
		case nft.OpAddTable:
			c.AddTable(t)
		case nft.OpAddSet:
			l, err := layoutOf(tx.Family, op.Set.Key)
			if err != nil {
				return nil, err
			}
			s := &nftables.Set{Table: t, Name: op.Name, IsMap: op.Set.Verdict, Comment: op.Set.Comment,
				KeyType: l[0], Concatenation: len(l) > 1}
			if len(l) > 1 {
				if s.KeyType, err = nftables.ConcatSetType(l...); err != nil {
					return nil, err
				}
			}
			if op.Set.Verdict {
				s.DataType = nftables.TypeVerdict
			}
			if err := c.AddSet(s, nil); err != nil {
				return nil, err
			}
			sets[op.Name], layouts[op.Name] = s, l
		case nft.OpAddChain:
			ch := &nftables.Chain{Name: op.Name, Table: t}
			if h := op.Chain.Hook; h != nil {
				accept := nftables.ChainPolicyAccept
				ch.Type, ch.Hooknum, ch.Priority, ch.Policy = nftables.ChainType(h.Type), googleHooks[h.Hook], nftables.ChainPriorityRef(nftables.ChainPriority(h.Priority)), &accept
			}
			c.AddChain(ch)
		case nft.OpAddRule:
			xs, err := compileRule(nil, tx.Family, op.Rule)
			if err != nil {
				return nil, err
			}
			c.AddRule(&nftables.Rule{Table: t, Chain: &nftables.Chain{Name: op.Name, Table: t}, Exprs: xs})
		case nft.OpAddElements:
			els := make([]nftables.SetElement, len(op.Elements))
			for i, e := range op.Elements {
				k, err := layouts[op.Name].appendKey(nil, e.Key)
				if err != nil {
					return nil, err
				}
				els[i].Key = k
				if e.Verdict != nil {
					if els[i].VerdictData, err = verdictOf(*e.Verdict); err != nil {
						return nil, err
					}
				}
			}
			// One message holds what fits a nested attribute's u16 length.
			for len(els) > 0 {
				k := min(len(els), 1000)
				if err := c.SetAddElements(sets[op.Name], els[:k]); err != nil {
					return nil, err
				}
				els = els[k:]
			}
		default:
			return nil, fmt.Errorf("op %s not used by the benchmark", describeOp(op))
		}
	}
	return t, nil
}

package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/nftrace"
)

// Report is the outcome of a verification: the trace of the path the kernel
// took, what the probe saw, and every difference between the simulated
// steps and the kernel's trace events, hop by hop.
type Report struct {
	Trace       *Trace     `json:"trace"`
	Probe       string     `json:"probe"`
	Checks      []HopCheck `json:"checks"`
	Differences []string   `json:"differences,omitempty"`
	// Unchecked says, per node, what the kernel could not show and what was
	// checked instead (a plane whose rules nftrace does not see).
	Unchecked []string `json:"unchecked,omitempty"`
	// Socket says what the sender's socket load balancer maps hold for the
	// traced frontend, when they agree with the trace (a disagreement is
	// a difference).
	Socket string `json:"socket,omitempty"`
	// TC says what the entry node's tc load balancer maps hold for the
	// traced frontend and the probe's connection, when they agree with the
	// trace (a disagreement is a difference).
	TC string `json:"tc,omitempty"`
}

// HopCheck compares one node pass of the packet or its reply.
type HopCheck struct {
	Node      string   `json:"node"`
	Direction string   `json:"direction"` // "request" or "reply"
	Expected  []string `json:"expected"`
	Kernel    []string `json:"kernel"`
	OK        bool     `json:"ok"`
	// Note says why the pass has no events when the tc load balancer
	// forwarded the packet past the node's netfilter.
	Note string `json:"note,omitempty"`
}

// OK reports whether the kernel took the traced path.
func (r *Report) OK() bool { return len(r.Differences) == 0 }

// Write prints the comparison.
func (r *Report) Write(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "verify: probe %s: %s\n", r.Trace.Request.Packet, r.Probe)
	for _, c := range r.Checks {
		mark := "ok"
		if !c.OK {
			mark = "DIFFERS"
		}
		fmt.Fprintf(b, "  %-8s %-7s %d kernel trace events, %s\n", c.Node, c.Direction, len(c.Kernel), mark)
		if c.Note != "" {
			fmt.Fprintf(b, "    %s\n", c.Note)
		}
		if !c.OK {
			fmt.Fprintf(b, "    simulated:\n")
			for _, l := range c.Expected {
				fmt.Fprintf(b, "      %s\n", l)
			}
			fmt.Fprintf(b, "    kernel:\n")
			for _, l := range c.Kernel {
				fmt.Fprintf(b, "      %s\n", l)
			}
		}
	}
	for _, d := range r.Differences {
		fmt.Fprintf(b, "  difference: %s\n", d)
	}
	if r.Socket != "" {
		fmt.Fprintf(b, "  socket:   %s\n", r.Socket)
	}
	if r.TC != "" {
		fmt.Fprintf(b, "  tc:       %s\n", r.TC)
	}
	for _, u := range r.Unchecked {
		fmt.Fprintf(b, "  unchecked: %s\n", u)
	}
	switch {
	case r.OK() && len(r.Checks) == 0 && r.Socket != "":
		fmt.Fprintf(b, "verify: the socket load balancer's maps agree with the trace; no packet crossed a node to check\n")
	case r.OK() && len(r.Unchecked) > 0:
		fmt.Fprintf(b, "verify: the kernel agrees where it could be checked (%d node passes checked, %d node(s) only in part: see unchecked)\n", len(r.Checks), len(r.Unchecked))
	case r.OK():
		fmt.Fprintf(b, "verify: the kernel took the same chains, rules and rewrites (%d node passes checked)\n", len(r.Checks))
	}
	if r.Trace.Verdict.Reason == reasonLeft {
		fmt.Fprintf(b, "verify: the probe's outcome is not compared: the packet leaves the cluster, where the tracer does not follow it\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// collectFor bounds the wait for trace events after the probe.
const (
	collectQuiet = 300 * time.Millisecond
	collectMax   = 20000
	collectTime  = 3 * time.Second
)

// Verify traces ask, sends the packet for real from the sender's namespace
// with nftrace set on every node it can cross, reads the kernel's trace
// events, and compares them with the simulated steps of the path the kernel
// took (the endpoint the kernel chose picks among the traced candidates).
// Every place's network namespace must be known (Network.NetNS).
//
// When the kernel's rules changed between their read and the probe (a plane
// rewrote a chain: its rules moved), or the tc load balancer's entry for the
// traced frontend changed while the probe ran (read before and after it: a
// proxy programmed a new Service's maps after its rules), the kernel's events
// cannot be held against the simulation of the state read: Verify then
// starts again, with the state read anew, at most verifyAttempts times in
// all.
func Verify(ctx context.Context, snap *model.Snapshot, net *Network, ask Ask, opts Options) (*Report, error) {
	return untilSettled(verifyAttempts, func() (*Report, bool, error) { return verifyOnce(ctx, snap, net, ask, opts) })
}

// verifyAttempts bounds Verify's attempts when the rules change under it.
const verifyAttempts = 3

// untilSettled runs once until it errs, its report is OK, or the rules did
// not move under it (a disagreement then stands), at most attempts times;
// it returns the last attempt's result.
func untilSettled(attempts int, once func() (*Report, bool, error)) (*Report, error) {
	for attempt := 1; ; attempt++ {
		rep, moved, err := once()
		if err != nil || rep.OK() || !moved || attempt >= attempts {
			return rep, err
		}
	}
}

// verifyOnce is one attempt of Verify; moved reports whether the rule
// handles of a traced table changed between the rules' read and the probe.
func verifyOnce(ctx context.Context, snap *model.Snapshot, net *Network, ask Ask, opts Options) (rep *Report, moved bool, err error) {
	e, st, req, err := prepare(ctx, snap, net, ask, opts)
	if err != nil {
		return nil, false, err
	}
	senderNS := net.NetNS[st.From.Name]
	if senderNS == "" {
		return nil, false, fmt.Errorf("verify: the network namespace of %s is unknown (give --netns %s=NETNS)", st.From, st.From.Name)
	}
	if req.EphemeralPort && (st.Packet.Proto == "tcp" || st.Packet.Proto == "udp") {
		// The sender's kernel picks the port, so the probe can bind it.
		rp, err := reservePort(senderNS, st.Packet.Proto, st.Packet.Src.Addr())
		if err != nil {
			return nil, false, fmt.Errorf("verify: %s: %w", st.From, err)
		}
		defer rp.Close()
		st.Packet.Src = netip.AddrPortFrom(st.Packet.Src.Addr(), rp.Port)
		req.Packet, req.EphemeralNetNS = st.Packet, senderNS
	}
	first, err := e.Trace(st, req)
	if err != nil {
		return nil, false, err
	}
	// The socket load balancer's decision is checked in its maps; its
	// choice among the backends is random in the kernel, so the probe
	// follows the traced one (the packets it sends are those of a
	// translated connect, to that backend).
	var socketDiffs []string
	var socketOK string
	if first.Socket != nil {
		if e.SocketMaps == nil {
			return nil, false, fmt.Errorf("verify: no reader of the socket load balancer's maps")
		}
		if socketDiffs, socketOK, err = checkSocket(first, e.SocketMaps); err != nil {
			return nil, false, err
		}
	}
	cands := []*Trace{first}
	if first.Choice != nil && !first.Choice.Socket && !first.Choice.Hashed && !opts.Endpoint.IsValid() {
		for _, c := range first.Choice.Candidates[1:] {
			ep, err := netip.ParseAddrPort(c.Endpoint)
			if err != nil {
				continue
			}
			s := st
			s.Endpoint = ep
			tr, err := e.Trace(s, req)
			if err != nil {
				return nil, false, err
			}
			cands = append(cands, tr)
		}
	}
	// Arm every node any candidate crosses, listening before arming.
	matches := map[string][]nftrace.Match{}
	for _, tr := range cands {
		for node, ms := range traceMatches(tr) {
			matches[node] = appendNew(matches[node], ms...)
		}
	}
	nodes := sortedKeys(matches)
	listeners := map[string]*nftrace.Listener{}
	var armed []*nftrace.Armed
	defer func() {
		for _, a := range armed {
			a.Close()
		}
		for _, l := range listeners {
			l.Close()
		}
	}()
	table := fmt.Sprintf("svcnet-trace-%d", os.Getpid())
	handles := map[string]map[string]ruleIndex{}
	// untraced are the nodes whose plane rules nftrace cannot see, and why.
	untraced := map[string]string{}
	// traced keeps the tables of a node whose events are compared.
	traced := func(node string, tables []*nft.Table) []*nft.Table {
		if _, ok := untraced[node]; ok {
			return nil
		}
		return tables
	}
	for _, node := range nodes {
		name := net.NetNS[node]
		if name == "" {
			return nil, false, fmt.Errorf("verify: the network namespace of node %s is unknown (give --netns %s=NETNS)", node, node)
		}
		ns, err := netns.Open(name)
		if err != nil {
			return nil, false, fmt.Errorf("verify: node %s: %w", node, err)
		}
		l, err := nftrace.Listen(ns)
		if err != nil {
			ns.Close()
			return nil, false, fmt.Errorf("verify: node %s: %w", node, err)
		}
		listeners[node] = l
		a, err := nftrace.Arm(ns, table, matches[node])
		if err != nil {
			ns.Close()
			return nil, false, fmt.Errorf("verify: node %s: %w", node, err)
		}
		armed = append(armed, a)
		if p := e.plane(); p.untraceable != nil {
			if why := p.untraceable(ctx, ns); why != "" {
				untraced[node] = why
			}
		}
		tables, err := e.Rules(node)
		if err == nil {
			handles[node], err = readHandles(ns, traced(node, tables), false)
		}
		ns.Close()
		if err != nil {
			return nil, false, fmt.Errorf("verify: node %s: %w", node, err)
		}
	}

	// The tc load balancer's state the probe meets, read again after it.
	var tcBefore string
	if first.TC != nil {
		if e.TCMaps == nil {
			return nil, false, fmt.Errorf("verify: no reader of the tc load balancer's maps")
		}
		if tcBefore, err = tcState(first.TC, e.TCMaps); err != nil {
			return nil, false, err
		}
	}
	probed := "not sent: the trace has the socket load balancer refuse the connect before any packet"
	if !first.Socket.Refused() {
		if probed, err = probe(ctx, senderNS, sentPacket(first)); err != nil {
			return nil, false, err
		}
	}
	events, err := collectAll(ctx, nodes, listeners)
	if err != nil {
		return nil, false, err
	}
	// A plane may have rewritten a chain with the same rules (new handles)
	// since the rules were read: the events name the rules by the handles of
	// the ruleset the probe met, read now too.
	for _, node := range nodes {
		if err := addHandles(node, net.NetNS[node], e, traced, handles[node]); err != nil {
			return nil, false, err
		}
		for _, gens := range handles[node] {
			if len(gens) > 1 && !maps.EqualFunc(gens[0], gens[len(gens)-1], slices.Equal) {
				moved = true
			}
		}
	}

	// The kernel's events are compared on the nodes where nftrace sees the
	// plane's tables. Elsewhere (iptables-legacy) none are: even the
	// nf_tables chains seen there meet the packet in an order against
	// x_tables' hooks of equal priority that no ruleset records.
	compared := func(node, table string) bool {
		if _, ok := untraced[node]; ok {
			return false
		}
		return e.plane().KernelTable(table)
	}
	rep = &Report{Probe: probed, Socket: socketOK, Differences: socketDiffs}
	// Where the endpoint choice is made on such a node, conntrack says which
	// endpoint the kernel chose.
	pinned := -1
	if first.Choice != nil {
		if _, ok := untraced[first.Choice.Node]; ok {
			var diff string
			pinned, diff, err = conntrackChoice(first, cands, net.NetNS[first.Choice.Node])
			if err != nil {
				return nil, false, err
			}
			if diff != "" {
				rep.Differences = append(rep.Differences, diff)
			}
		}
	}
	// The tc load balancer's choice is read from its conns map: the probe's
	// connection names the backend the kernel chose (and a remote one's
	// SNAT port, which the trace then shows).
	if first.TC != nil {
		tcAfter, err := tcState(first.TC, e.TCMaps)
		if err != nil {
			return nil, false, err
		}
		if diff := tcMoved(first.TC, tcBefore, tcAfter); diff != "" {
			rep.Differences, moved = append(rep.Differences, diff), true
		}
		k, err := checkTC(first, e.TCMaps)
		if err != nil {
			return nil, false, err
		}
		rep.Differences, rep.TC = append(rep.Differences, k.diffs...), k.checked
		if k.found {
			for i, tr := range cands {
				if tr.TC.Backend != k.conn.Backend {
					continue
				}
				pinned = i
				if k.conn.SNAT.IsValid() {
					s := st
					s.Endpoint, s.SNATPort = k.conn.Backend, k.conn.SNAT.Port()
					if cands[i], err = e.Trace(s, req); err != nil {
						return nil, false, err
					}
				}
			}
		}
	}
	for _, node := range sortedKeys(untraced) {
		rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("node %s: %s; not checked: the packet's way through the node's chains and rules; checked instead: the rules read back equal the rendered ones, the connection's DNAT in conntrack goes to a traced candidate, and the probe ends as traced", node, untraced[node]))
		diffs, err := renderedDiffers(e, node)
		if err != nil {
			return nil, false, err
		}
		rep.Differences = append(rep.Differences, diffs...)
	}

	// The candidate whose simulated steps the kernel's events match best.
	best, bestScore := 0, -1
	var bestChecks []HopCheck
	for i, tr := range cands {
		if pinned >= 0 && i != pinned {
			continue
		}
		checks := compareTrace(tr, events, handles, compared)
		score := 0
		for _, c := range checks {
			if c.OK {
				score++
			}
		}
		if score > bestScore {
			best, bestScore, bestChecks = i, score, checks
		}
	}
	rep.Trace = cands[best]
	for _, c := range bestChecks {
		if _, ok := untraced[c.Node]; !ok {
			rep.Checks = append(rep.Checks, c)
		}
	}
	if rep.Trace.Choice != nil {
		for i := range rep.Trace.Choice.Candidates {
			c := &rep.Trace.Choice.Candidates[i]
			c.Chosen = c.Endpoint == chosenOf(rep.Trace)
		}
	}
	for _, c := range rep.Checks {
		if !c.OK {
			rep.Differences = append(rep.Differences, fmt.Sprintf("node %s (%s): the kernel's chains, rules or verdicts differ from the simulation", c.Node, c.Direction))
		}
	}
	if want := expectedProbe(rep.Trace); want != "" && !rep.Trace.Socket.Refused() && !strings.HasPrefix(rep.Probe, want) {
		rep.Differences = append(rep.Differences, fmt.Sprintf("the probe %s, but the trace says %s", rep.Probe, rep.Trace.Verdict.Kind))
	}
	return rep, moved, nil
}

// collectAll reads every node's trace events at once; a node whose events
// stop (or never start: a candidate the kernel did not take) ends by the
// bound, which is not an error.
func collectAll(ctx context.Context, nodes []string, listeners map[string]*nftrace.Listener) (map[string][]nftrace.Event, error) {
	type res struct {
		node string
		evs  []nftrace.Event
		err  error
	}
	ch := make(chan res, len(nodes))
	cctx, cancel := context.WithTimeout(ctx, collectTime)
	defer cancel()
	for _, node := range nodes {
		go func() {
			evs, err := listeners[node].Collect(cctx, collectQuiet, collectMax)
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				err = nil
			}
			ch <- res{node, evs, err}
		}()
	}
	out := map[string][]nftrace.Event{}
	var errs []error
	for range nodes {
		r := <-ch
		if r.err != nil {
			errs = append(errs, fmt.Errorf("verify: node %s: trace events: %w", r.node, r.err))
		}
		out[r.node] = r.evs
	}
	return out, errors.Join(errs...)
}

// sentPacket is the first packet the sender's socket sends: the traced
// one, to the backend when the socket load balancer translated the connect.
func sentPacket(tr *Trace) Tuple {
	if tr.Socket.Translated() {
		return *tr.Socket.Sent
	}
	return tr.Request.Packet
}

// chosenOf returns the endpoint the trace followed.
func chosenOf(tr *Trace) string {
	if tr.Socket.Translated() {
		return tr.Socket.Backend.String()
	}
	for _, h := range tr.Hops {
		for _, rw := range h.Rewrites {
			if rw.Kind == RewriteDNAT {
				return rw.After.Dst.String()
			}
		}
	}
	return ""
}

// expectedProbe is how a real connection ends for the trace's verdict; ""
// when the trace cannot say: a packet that leaves the cluster meets what the
// tracer does not model (whether anything out there answers).
func expectedProbe(tr *Trace) string {
	if tr.Verdict.Reason == reasonLeft {
		return ""
	}
	switch tr.Verdict.Kind {
	case Delivered:
		if tr.Request.Packet.Proto == "udp" {
			return "answered"
		}
		return "connected"
	case Rejected:
		return "refused"
	case Dropped, Filtered:
		if tr.Request.Packet.Proto == "udp" {
			return "no answer"
		}
		return "timed out"
	}
	return ""
}

// readHandles returns the rule handles of the node's tables (those the tracer
// read its rules from), by family and table ("ip svcnet"): those of the
// tables themselves when they were read back from the kernel (a table
// handle) unless fresh, else read from the kernel now.
func readHandles(ns *netns.NS, tables []*nft.Table, fresh bool) (map[string]ruleIndex, error) {
	out := map[string]ruleIndex{}
	for _, t := range tables {
		h := nftrace.HandlesOf(t)
		if t.Handle == 0 || fresh {
			var err error
			if h, err = nftrace.RuleHandles(ns, t.Family, t.Name); err != nil {
				return nil, err
			}
		}
		out[t.Family.String()+" "+t.Name] = ruleIndex{h}
	}
	return out, nil
}

// addHandles adds the handles node's tables whose events are compared
// (traced) have now, in namespace name, to those read before.
func addHandles(node, name string, e *Engine, traced func(string, []*nft.Table) []*nft.Table, to map[string]ruleIndex) error {
	ns, err := netns.Open(name)
	if err != nil {
		return fmt.Errorf("verify: node %s: %w", node, err)
	}
	defer ns.Close()
	tables, err := e.Rules(node)
	if err != nil {
		return fmt.Errorf("verify: node %s: %w", node, err)
	}
	now, err := readHandles(ns, traced(node, tables), true)
	if err != nil {
		return fmt.Errorf("verify: node %s: %w", node, err)
	}
	for k, gens := range now {
		to[k] = append(to[k], gens...)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func appendNew(l []nftrace.Match, ms ...nftrace.Match) []nftrace.Match {
	for _, m := range ms {
		if !slices.Contains(l, m) {
			l = append(l, m)
		}
	}
	return l
}

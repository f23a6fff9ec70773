package proxy_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"

	iptplane "github.com/svcnet/svcnet/internal/dataplane/iptables"
	usplane "github.com/svcnet/svcnet/internal/dataplane/userspace"
	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/testbin"
)

// planeView is what the tests read or break in the node's kernel, in the
// terms of the data plane the proxy runs (testbin.DataPlane()). The traffic
// the tests send, and what they expect of it, is the same on every plane;
// the view makes their assertions on the kernel's state as strong on each.
type planeView interface {
	// frontends returns the Service frontends the plane dispatches to
	// endpoints, as frontendKey writes them, sorted, and the state read
	// (for messages).
	frontends() ([]string, string)
	// nodePortAddrs returns the addresses the plane serves NodePorts on
	// (both families) and the state read.
	nodePortAddrs() ([]netip.Addr, string)
	// checkMark returns nil when the Service masquerade of IPv4 sets,
	// tests and clears exactly mark, and no rule uses another mark bit
	// (kube-proxy's default 0x4000); on a plane without a Service
	// masquerade (planeMasquerades false), nil when no rule of the plane
	// marks, tests a mark or masquerades at all.
	checkMark(mark uint32) error
	// egressMasquerade reports whether the plane's IPv4 egress masquerade
	// masquerades anything, and the state read (every plane programs it).
	egressMasquerade() (bool, string)
	// objects returns the plane's kernel objects in the node namespace
	// (tables, or chains and the jumps to them), sorted.
	objects() []string
	// wantRunning are objects a running dual-stack proxy has.
	wantRunning() []string
	// addBystander adds another agent's state beside the plane's, which
	// --cleanup must leave; bystander reports whether it is intact.
	addBystander()
	bystander() (bool, string)
	// drift returns the command (for the node namespace) of one of the
	// ways driftNames lists to break the plane's state behind the proxy's
	// back.
	drift(name string) []string
	// dump is the plane's state, for a failing test's log.
	dump() string
}

// driftNames are the ways a user breaks the state of the plane under test,
// for planeView.drift: on nftables, a NAT table flushed, or the tables
// deleted; on iptables, the dispatch chain flushed (the chains it jumps to
// stay, as `nft flush table` keeps the tables), or every chain of every
// table flushed and deleted, as a firewall reset does (the canary goes
// too); on userspace, the redirect table flushed (its chains stay, empty,
// and every Service's traffic goes on to its ClusterIP unredirected), or
// deleted.
func driftNames() []string {
	switch testbin.DataPlane() {
	case iptplane.Name:
		return []string{"flush-services", "reset-tables"}
	case usplane.Name:
		return []string{"flush-table", "delete-table"}
	}
	return []string{"flush-table", "delete-tables"}
}

// frontendKey is how planeView names a frontend: "tcp 10.96.0.1:80",
// "udp [fd00:96::1]:53".
func frontendKey(proto string, a netip.Addr, port int) string {
	return proto + " " + netip.AddrPortFrom(a.Unmap(), uint16(port)).String()
}

// hasFrontendAddr reports whether any frontend is on address a.
func hasFrontendAddr(fronts []string, a string) bool {
	addr := netip.MustParseAddr(a)
	for _, f := range fronts {
		_, ap, _ := strings.Cut(f, " ")
		if netip.MustParseAddrPort(ap).Addr() == addr {
			return true
		}
	}
	return false
}

// plane returns the view of the plane the proxy of this test runs.
func (c *cluster) plane() planeView {
	c.t.Helper()
	v, err := c.viewOf(testbin.DataPlane())
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// viewOf returns (and keeps) the cluster's view of data plane p.
func (c *cluster) viewOf(p string) (planeView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view == nil {
		switch p {
		case "", "nftables":
			c.view = &nftView{c: c}
		case ebpfplane.Name:
			c.view = &ebpfView{nftView{c: c}}
		case iptplane.Name:
			// The variant the proxy chose by the same rule in the same
			// namespace (iptables.Detect).
			c.view = &iptView{c: c, variant: ipt.Detect(context.Background(), c.node.CommandContext)}
		case usplane.Name:
			c.view = &usView{c: c}
		default:
			return nil, fmt.Errorf("test/proxy has no view of data plane %q (planeview_test.go)", p)
		}
	}
	return c.view, nil
}

// nftView is the nftables plane: the main table "svcnet" and its NAT
// shards "svcnet-nat-NN", per family.
type nftView struct{ c *cluster }

var (
	reNFTTable   = regexp.MustCompile(`(?m)^table (ip6?) (svcnet\S*)$`)
	reNFTElement = regexp.MustCompile(`([0-9a-f:.]+) \. (tcp|udp|sctp) \. (\d+)`)
	reNFTSet     = regexp.MustCompile(`(?s)elements = \{(.*?)\}`)
)

// tables returns the plane's tables as "ip svcnet", "ip6 svcnet-nat-00".
func (v *nftView) tables() []string {
	out, _ := v.c.nodeRun("nft", "list", "tables")
	var ts []string
	for _, m := range reNFTTable.FindAllStringSubmatch(out, -1) {
		ts = append(ts, m[1]+" "+m[2])
	}
	slices.Sort(ts)
	return ts
}

func (v *nftView) frontends() ([]string, string) {
	var keys []string
	var dump strings.Builder
	for _, t := range v.tables() {
		fam, name, _ := strings.Cut(t, " ")
		if !strings.HasPrefix(name, "svcnet-nat-") {
			continue
		}
		out, err := v.c.nodeRun("nft", "list", "map", fam, name, "service-ips")
		fmt.Fprintf(&dump, "%s service-ips (err %v):\n%s\n", t, err, out)
		for _, m := range reNFTElement.FindAllStringSubmatch(out, -1) {
			port, _ := strconv.Atoi(m[3])
			keys = append(keys, frontendKey(m[2], netip.MustParseAddr(m[1]), port))
		}
	}
	slices.Sort(keys)
	return keys, dump.String()
}

func (v *nftView) nodePortAddrs() ([]netip.Addr, string) {
	var addrs []netip.Addr
	var dump strings.Builder
	for _, fam := range []string{"ip", "ip6"} {
		out, err := v.c.nodeRun("nft", "list", "set", fam, "svcnet", "nodeport-ips")
		fmt.Fprintf(&dump, "%s nodeport-ips (err %v):\n%s\n", fam, err, out)
		if m := reNFTSet.FindStringSubmatch(out); m != nil {
			for _, s := range strings.Split(m[1], ",") {
				if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
					addrs = append(addrs, a)
				}
			}
		}
	}
	return addrs, dump.String()
}

func (v *nftView) checkMark(mark uint32) error {
	nat := v.c.mustNode("nft", "list", "chain", "ip", "svcnet-nat-00", "mark-for-masquerade")
	masq := v.c.mustNode("nft", "list", "chain", "ip", "svcnet", "masquerading")
	m := fmt.Sprintf("0x%08x", mark)
	if !strings.Contains(nat, "meta mark set meta mark | "+m) || !strings.Contains(masq, "meta mark & "+m+" == 0x00000000 return") ||
		!strings.Contains(masq, "meta mark set meta mark ^ "+m) {
		return fmt.Errorf("rules do not set, test and clear mark %s:\n%s\n%s", m, nat, masq)
	}
	if def := fmt.Sprintf("0x%08x", 0x4000); mark != 0x4000 && strings.Contains(nat+masq, def) {
		return fmt.Errorf("rules use mark %s besides %s:\n%s\n%s", def, m, nat, masq)
	}
	return nil
}

func (v *nftView) egressMasquerade() (bool, string) {
	out, err := v.c.nodeRun("nft", "list", "chain", "ip", "svcnet", "egress-masquerading")
	return err == nil && strings.Contains(out, "masquerade fully-random"), out
}

func (v *nftView) objects() []string {
	var out []string
	for _, t := range v.tables() {
		out = append(out, "table "+t)
	}
	return out
}

func (v *nftView) wantRunning() []string {
	return []string{"table ip svcnet", "table ip svcnet-nat-00", "table ip6 svcnet", "table ip6 svcnet-nat-00"}
}

func (v *nftView) addBystander() { v.c.mustNode("nft", "add", "table", "ip", "bystander") }

func (v *nftView) bystander() (bool, string) {
	out := v.c.mustNode("nft", "list", "tables")
	return strings.Contains(out, "table ip bystander\n"), out
}

func (v *nftView) drift(name string) []string {
	switch name {
	case "flush-table":
		return []string{"nft", "flush", "table", "ip", "svcnet-nat-00"}
	case "delete-tables":
		return []string{"nft", "delete table ip svcnet; delete table ip svcnet-nat-00"}
	}
	v.c.t.Fatalf("nftables: no drift %q", name)
	return nil
}

func (v *nftView) dump() string {
	out, _ := v.c.nodeRun("nft", "list", "ruleset")
	return "node nft ruleset:\n" + tail(out, 300)
}

// ebpfView is the eBPF plane: the nftables plane's tables, which the
// traffic of these tests meets (it comes from this process, outside the
// proxy's cgroup), and the socket load balancer's pins in the test's BPF
// filesystem (--bpf-pin-dir), by which it stays attached to the cgroup.
type ebpfView struct{ nftView }

func (v *ebpfView) objects() []string {
	out := v.nftView.objects()
	root := v.c.bpfPins
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			out = append(out, "pin "+rel)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func (v *ebpfView) wantRunning() []string {
	dir, err := socklb.PinDir(v.c.bpfPins, v.c.cgroupDir)
	if err != nil {
		v.c.t.Fatal(err)
	}
	rel, _ := filepath.Rel(v.c.bpfPins, dir)
	return append(v.nftView.wantRunning(), "pin "+rel+"/link-socklb_connect4", "pin "+rel+"/services")
}

// iptView is the iptables plane: kube-proxy's chains in the filter, nat
// and mangle tables of both families, read with iptables-save of the
// variant the proxy runs.
type iptView struct {
	c       *cluster
	variant ipt.Variant
}

// iptTables are the tables the plane has chains in.
var iptTables = []string{"filter", "nat", "mangle"}

// bystanderChain is another agent's nat chain, jumped to from POSTROUTING.
const bystanderChain = "BYSTANDER"

// cmd is the variant's iptables (or ip6tables) command.
func (v *iptView) cmd(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "ip6tables-" + string(v.variant)
	}
	return "iptables-" + string(v.variant)
}

// table reads one table of family f (nil when the variant has none), and
// fails the test when it cannot.
func (v *iptView) table(f ipfamily.Family, table string) *ipt.Table {
	v.c.t.Helper()
	t, err := v.read(f, table)
	if err != nil {
		v.c.t.Fatal(err)
	}
	return t
}

// read reads one table of family f; nil when the variant has none.
func (v *iptView) read(f ipfamily.Family, table string) (*ipt.Table, error) {
	out, err := (&ipt.Exec{Variant: v.variant, Command: v.c.node.CommandContext}).Save(context.Background(), f, table)
	if err != nil {
		return nil, fmt.Errorf("iptables-save %s %s in node: %w", f, table, err)
	}
	tables, err := ipt.ParseSave(out)
	if err != nil {
		return nil, fmt.Errorf("iptables-save %s %s in node: %w\n%s", f, table, err, out)
	}
	return tables[table], nil
}

// ruleArgs returns the value after each option of rule spec r (e.g. "-d",
// "--dport", "-j"), the comment's text dropped.
func ruleArgs(r string) map[string]string {
	args := map[string]string{}
	w := strings.Fields(r)
	for i := 0; i < len(w); i++ {
		if w[i] == "--comment" && i+1 < len(w) && strings.HasPrefix(w[i+1], `"`) {
			for i++; i < len(w) && !strings.HasSuffix(w[i], `"`); i++ {
			}
			continue
		}
		if strings.HasPrefix(w[i], "-") && i+1 < len(w) && w[i+1] != "!" && !strings.HasPrefix(w[i+1], "-") {
			args[w[i]] = w[i+1]
			i++
		}
	}
	return args
}

// prefixAddr parses "-d" values: "10.96.0.1/32" or "10.96.0.1".
func prefixAddr(s string) (netip.Addr, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr(), p.IsSingleIP()
	}
	a, err := netip.ParseAddr(s)
	return a, err == nil
}

func (v *iptView) frontends() ([]string, string) {
	var keys []string
	var dump strings.Builder
	for _, f := range ipfamily.All {
		nat := v.table(f, "nat")
		if nat == nil || nat.Chains[iptplane.ChainServices] == nil {
			continue
		}
		for _, r := range nat.Chains[iptplane.ChainServices].Rules {
			fmt.Fprintf(&dump, "%s nat -A %s %s\n", f, iptplane.ChainServices, r)
			a := ruleArgs(r)
			addr, ok := prefixAddr(a["-d"])
			port, err := strconv.Atoi(a["--dport"])
			if ok && err == nil && iptplane.IsServiceChain(a["-j"]) {
				keys = append(keys, frontendKey(a["-p"], addr, port))
			}
		}
	}
	slices.Sort(keys)
	return keys, dump.String()
}

func (v *iptView) nodePortAddrs() ([]netip.Addr, string) {
	var addrs []netip.Addr
	var dump strings.Builder
	for _, f := range ipfamily.All {
		nat := v.table(f, "nat")
		if nat == nil || nat.Chains[iptplane.ChainServices] == nil {
			continue
		}
		for _, r := range nat.Chains[iptplane.ChainServices].Rules {
			a := ruleArgs(r)
			if a["-j"] != iptplane.ChainNodePorts {
				continue
			}
			fmt.Fprintf(&dump, "%s nat -A %s %s\n", f, iptplane.ChainServices, r)
			if addr, ok := prefixAddr(a["-d"]); ok {
				addrs = append(addrs, addr)
			}
		}
	}
	return addrs, dump.String()
}

func (v *iptView) checkMark(mark uint32) error {
	nat, filter := v.table(ipfamily.IPv4, "nat"), v.table(ipfamily.IPv4, "filter")
	text := string(nat.Save()) + string(filter.Save())
	rules := func(t *ipt.Table, chain string) []string {
		if c := t.Chains[chain]; c != nil {
			return c.Rules
		}
		return nil
	}
	// iptables-save prints --or-mark M as --set-xmark M/M and --xor-mark M
	// as --set-xmark M/0x0.
	m := fmt.Sprintf("0x%x", mark)
	set := rules(nat, iptplane.ChainMarkMasq)
	post := rules(nat, iptplane.ChainPostrouting)
	fwd := rules(filter, iptplane.ChainForward)
	if !slices.Equal(set, []string{"-j MARK --set-xmark " + m + "/" + m}) ||
		!slices.Contains(post, "-m mark ! --mark "+m+"/"+m+" -j RETURN") ||
		!slices.Contains(post, "-j MARK --set-xmark "+m+"/0x0") ||
		!slices.ContainsFunc(fwd, func(r string) bool { return strings.Contains(r, "-m mark --mark "+m+"/"+m+" -j ACCEPT") }) {
		return fmt.Errorf("rules do not set, test and clear mark %s:\n%s", m, text)
	}
	if def := "0x4000"; mark != 0x4000 && strings.Contains(text, def) {
		return fmt.Errorf("rules use mark %s besides %s:\n%s", def, m, text)
	}
	return nil
}

func (v *iptView) egressMasquerade() (bool, string) {
	nat := v.table(ipfamily.IPv4, "nat")
	if nat == nil {
		return false, "no nat table"
	}
	c := nat.Chains[iptplane.ChainEgressMasq]
	post := nat.Chains["POSTROUTING"]
	jumped := post != nil && slices.ContainsFunc(post.Rules, func(r string) bool { return ipt.JumpTarget(r) == iptplane.ChainEgressMasq })
	masq := c != nil && slices.ContainsFunc(c.Rules, func(r string) bool { return strings.Contains(r, "-j MASQUERADE") })
	return jumped && masq, string(nat.Save())
}

// own reports whether chain of a table belongs to the plane: kube-proxy's
// chains (its --cleanup removes them too), svcnet's egress chain.
func own(chain string) bool {
	return strings.HasPrefix(chain, "KUBE-") || chain == iptplane.ChainEgressMasq
}

func (v *iptView) objects() []string {
	var out []string
	for _, f := range ipfamily.All {
		for _, name := range iptTables {
			t := v.table(f, name)
			if t == nil {
				continue
			}
			for _, n := range t.ChainNames() {
				if own(n) {
					out = append(out, fmt.Sprintf("%s %s chain %s", f, name, n))
				}
				if ipt.IsBuiltin(name, n) {
					for _, r := range t.Chains[n].Rules {
						if to := ipt.JumpTarget(r); own(to) {
							out = append(out, fmt.Sprintf("%s %s %s -> %s", f, name, n, to))
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (v *iptView) wantRunning() []string {
	var out []string
	for _, f := range ipfamily.All {
		for _, j := range iptplane.Jumps {
			out = append(out, fmt.Sprintf("%s %s chain %s", f, j.Table, j.To), fmt.Sprintf("%s %s %s -> %s", f, j.Table, j.From, j.To))
		}
		out = append(out, fmt.Sprintf("%s nat chain %s", f, iptplane.ChainMarkMasq), fmt.Sprintf("%s mangle chain %s", f, iptplane.ChainCanary))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (v *iptView) addBystander() {
	for _, f := range ipfamily.All {
		v.c.mustNode(v.cmd(f), "-t", "nat", "-N", bystanderChain)
		v.c.mustNode(v.cmd(f), "-t", "nat", "-A", bystanderChain, "-j", "RETURN")
		v.c.mustNode(v.cmd(f), "-t", "nat", "-I", "POSTROUTING", "-j", bystanderChain)
	}
}

func (v *iptView) bystander() (bool, string) {
	var dump strings.Builder
	ok := true
	for _, f := range ipfamily.All {
		nat := v.table(f, "nat")
		if nat == nil {
			return false, f.String() + ": no nat table"
		}
		dump.Write(nat.Save())
		c := nat.Chains[bystanderChain]
		ok = ok && c != nil && slices.Equal(c.Rules, []string{"-j RETURN"}) &&
			slices.ContainsFunc(nat.Chains["POSTROUTING"].Rules, func(r string) bool { return ipt.JumpTarget(r) == bystanderChain })
	}
	return ok, dump.String()
}

func (v *iptView) drift(name string) []string {
	ipt4 := v.cmd(ipfamily.IPv4)
	switch name {
	case "flush-services":
		return []string{ipt4, "-t", "nat", "-F", iptplane.ChainServices}
	case "reset-tables":
		var reset []string
		for _, t := range iptTables {
			reset = append(reset, ipt4+" -t "+t+" -F", ipt4+" -t "+t+" -X")
		}
		return []string{"sh", "-e", "-c", strings.Join(reset, "; ")}
	}
	v.c.t.Fatalf("iptables: no drift %q", name)
	return nil
}

func (v *iptView) dump() string {
	var b strings.Builder
	for _, f := range ipfamily.All {
		for _, name := range iptTables {
			t, err := v.read(f, name)
			switch {
			case err != nil:
				fmt.Fprintf(&b, "%v\n", err)
			case t != nil:
				fmt.Fprintf(&b, "%s ", f)
				b.Write(t.Save())
			}
		}
	}
	return "node iptables (" + string(v.variant) + "):\n" + tail(b.String(), 300)
}

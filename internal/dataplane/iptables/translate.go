package iptables

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/nft"
)

// Translation of iptables tables into nf_tables tables the packet simulator
// (internal/nft/sim) runs with the same meaning, for the tracer. Each
// iptables rule becomes one nft.Rule in the same chain at the same index
// (iptables-nft stores it so, which is how the kernel's trace events, which
// name a rule by its handle, map back to the rule), with the rule's text as
// its Source ("-A CHAIN SPEC": the trace prints kube-proxy's own rule) and
// its comment. Built-in chains become base chains at iptables' priorities
// (nat: dstnat -100 at prerouting and output, srcnat 100 at input and
// postrouting; filter: 0); user chains are regular chains.
//
// The translation knows the matches and targets this plane renders and a
// few common ones more, each as the kernel runs it:
//
//	-s, -d [!] ADDR[/LEN]          address match
//	-p tcp|udp|sctp                protocol match
//	-i [!] NAME[+]                 input interface (+: name prefix)
//	-m tcp|udp|sctp --dport/--sport N
//	-m comment --comment TEXT      the rule's comment
//	-m addrtype --dst-type/--src-type LOCAL
//	-m mark [!] --mark V[/M]
//	-m conntrack --ctstate S[,S]
//	-m statistic --mode random --probability P
//	                               P must be 1/n for an integer n (to the
//	                               kernel's precision, 2^-31): a random
//	                               branch of probability 1/n, so a
//	                               cascade of 1/(n-i) gives each endpoint
//	                               exactly 1/n, as the nftables plane's
//	                               numgen does
//	-m recent --rcheck --seconds S --name L / --set --name L
//	                               (--rsource, full mask): the list L as a
//	                               dynamic set of source addresses with
//	                               timeout S (ClientIP affinity)
//	-j ACCEPT|DROP|RETURN|CHAIN, -g CHAIN
//	-j REJECT [--reject-with icmp-port-unreachable|icmp6-port-unreachable|tcp-reset]
//	-j DNAT --to-destination ADDR[:PORT]
//	-j MASQUERADE [--random-fully]
//	-j MARK --or-mark V, --xor-mark V, --set-xmark V/V (or), V/0 (xor)
//
// Anything else (another match or target, an option of a known one the
// simulator cannot weigh, a negation it cannot express) is an error naming
// the table, the chain and the rule: the tracer never skips a rule it does
// not understand, since the rule may decide the packet's fate. A kernel
// read-back holding another program's rules (Docker, a CNI plugin's
// portmap) therefore explains as far as those rules are among the above,
// and otherwise fails with the rule it cannot explain. A built-in chain
// whose policy is DROP ends with a translated drop rule (the simulator's
// base chains accept at their end).

// builtinHooks maps each built-in chain of a table to its hook and priority
// (iptables-nft registers them so; iptables-legacy's hooks run at the same
// priorities).
var builtinHooks = map[string]map[string]nft.Hook{
	TableNAT: {
		"PREROUTING":  {Type: "nat", Hook: "prerouting", Priority: -100},
		"INPUT":       {Type: "nat", Hook: "input", Priority: 100},
		"OUTPUT":      {Type: "nat", Hook: "output", Priority: -100},
		"POSTROUTING": {Type: "nat", Hook: "postrouting", Priority: 100},
	},
	TableFilter: {
		"INPUT":   {Type: "filter", Hook: "input", Priority: 0},
		"FORWARD": {Type: "filter", Hook: "forward", Priority: 0},
		"OUTPUT":  {Type: "filter", Hook: "output", Priority: 0},
	},
}

// TranslatedTables are the iptables tables Translate takes: the two this
// plane programs.
var TranslatedTables = []string{TableFilter, TableNAT}

// Translate returns the nat and filter tables of family f (as
// internal/iptables.ParseSave reads iptables-save's output, or as
// RenderTables builds them) as nf_tables tables, in the order of
// TranslatedTables; tables absent from tables are left out. See the
// translation's contract above.
func Translate(f ipfamily.Family, tables map[string]*ipt.Table) ([]*nft.Table, error) {
	var out []*nft.Table
	for _, name := range TranslatedTables {
		t := tables[name]
		if t == nil {
			continue
		}
		nt, err := translateTable(f, t)
		if err != nil {
			return nil, err
		}
		out = append(out, nt)
	}
	return out, nil
}

func translateTable(f ipfamily.Family, t *ipt.Table) (*nft.Table, error) {
	tr := &translator{fam: f, table: t, out: nft.NewTable(f, t.Name), timeouts: map[string]time.Duration{}}
	hooks := builtinHooks[t.Name]
	for _, name := range t.ChainNames() {
		c := t.Chains[name]
		nc := &nft.Chain{Name: name}
		if h, ok := hooks[name]; ok {
			nc.Hook = &h
		} else if ipt.IsBuiltin(t.Name, name) {
			return nil, fmt.Errorf("table %s: built-in chain %s: not translated", t.Name, name)
		}
		for i, spec := range c.Rules {
			r, err := tr.rule(name, spec)
			if err != nil {
				return nil, fmt.Errorf("%s table %s chain %s rule %d %q: %w", Name, t.Name, name, i, "-A "+name+" "+spec, err)
			}
			nc.Rules = append(nc.Rules, r)
		}
		switch c.Policy {
		case "-", "", "ACCEPT":
		case "DROP":
			if nc.Hook == nil {
				return nil, fmt.Errorf("table %s: chain %s: a policy on a user chain", t.Name, name)
			}
			nc.Rules = append(nc.Rules, &nft.Rule{Exprs: []nft.Expr{nft.Verdict{Kind: nft.Drop}}, Source: policySource(name, c.Policy)})
		default:
			return nil, fmt.Errorf("table %s: chain %s: policy %s not translated", t.Name, name, c.Policy)
		}
		tr.out.Chains[name] = nc
	}
	for _, name := range slices.Sorted(maps.Keys(tr.timeouts)) {
		tr.out.Sets[name] = &nft.Set{Name: name, Key: []nft.Field{nft.FieldSaddr}, Timeout: tr.timeouts[name],
			Comment: "xt_recent list " + name, Elements: map[string]nft.Element{}}
	}
	return tr.out, nil
}

// translator translates one table's rules.
type translator struct {
	fam   ipfamily.Family
	table *ipt.Table
	out   *nft.Table
	// timeouts are the xt_recent lists met, with the longest --seconds a
	// check gives (0 when only --set: the entries do not expire).
	timeouts map[string]time.Duration
}

// ruleParse is one rule as it is read: the header matches (iptables
// evaluates -s, -d, -p, -i before any -m match), the matches of -m modules
// in order, and the target.
type ruleParse struct {
	header, matches []nft.Expr
	comment         string
	target          []nft.Expr
	proto           uint8
}

// rule translates one rule spec of chain.
func (tr *translator) rule(chain, spec string) (*nft.Rule, error) {
	w, err := Words(spec)
	if err != nil {
		return nil, err
	}
	p := &ruleParse{}
	module := ""
	var rec *recent
	for i := 0; i < len(w); i++ {
		neg := false
		if w[i] == "!" {
			neg = true
			i++
			if i == len(w) {
				return nil, fmt.Errorf("nothing follows the last negation")
			}
		}
		opt := w[i]
		arg := func() (string, error) {
			if i+1 >= len(w) {
				return "", fmt.Errorf("%s without a value", opt)
			}
			i++
			return w[i], nil
		}
		v := ""
		if opt != "-m" && opt != "--match" && opt != "--rsource" && opt != "--reap" && opt != "--set" && opt != "--rcheck" && opt != "--random-fully" {
			if v, err = arg(); err != nil {
				return nil, err
			}
		}
		switch opt {
		case "-m", "--match":
			if rec != nil {
				if err := tr.recentDone(rec, p); err != nil {
					return nil, err
				}
				rec = nil
			}
			if module, err = arg(); err != nil {
				return nil, err
			}
			switch module {
			case "comment", "tcp", "udp", "sctp", "addrtype", "mark", "conntrack", "statistic":
			case "recent":
				rec = &recent{}
			default:
				return nil, fmt.Errorf("match -m %s: not translated", module)
			}
			if neg {
				return nil, fmt.Errorf("! -m %s: not translated", module)
			}
			continue
		case "-s", "--source", "-d", "--destination":
			pfx, err := addrPrefix(tr.fam, v)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", opt, v, err)
			}
			fld := nft.FieldSaddr
			if opt == "-d" || opt == "--destination" {
				fld = nft.FieldDaddr
			}
			p.header = append(p.header, nft.AddrMatch{Field: fld, Neq: neg, Prefix: pfx})
			continue
		case "-p", "--protocol":
			n, ok := nft.ProtoNumber(v)
			if !ok || neg {
				return nil, fmt.Errorf("%s%s %s: not translated (tcp, udp or sctp)", bang(neg), opt, v)
			}
			p.proto = n
			p.header = append(p.header, nft.ProtoMatch{Proto: n})
			continue
		case "-i", "--in-interface":
			name, prefix := strings.CutSuffix(v, "+")
			if name == "" || len(name) >= nft.IfNameSize {
				return nil, fmt.Errorf("%s %q: not translated", opt, v)
			}
			p.header = append(p.header, nft.IifnameMatch{Name: name, Prefix: prefix, Neq: neg})
			continue
		case "-j", "--jump", "-g", "--goto":
			if neg {
				return nil, fmt.Errorf("! %s", opt)
			}
			if rec != nil {
				if err := tr.recentDone(rec, p); err != nil {
					return nil, err
				}
				rec = nil
			}
			t, err := tr.target(opt == "-g" || opt == "--goto", v, w[i+1:], p)
			if err != nil {
				return nil, err
			}
			p.target = t
			i = len(w)
			continue
		}
		if err := tr.moduleOption(module, opt, v, neg, p, rec); err != nil {
			return nil, err
		}
	}
	if rec != nil {
		if err := tr.recentDone(rec, p); err != nil {
			return nil, err
		}
	}
	r := &nft.Rule{Exprs: append(append(p.header, p.matches...), p.target...), Comment: p.comment, Source: "-A " + chain + " " + spec}
	return r, nil
}

func bang(neg bool) string {
	if neg {
		return "! "
	}
	return ""
}

// moduleOption translates one option of the -m module in effect.
func (tr *translator) moduleOption(module, opt, v string, neg bool, p *ruleParse, rec *recent) error {
	bad := func() error {
		if module == "" {
			return fmt.Errorf("%s%s %s: not translated", bang(neg), opt, v)
		}
		return fmt.Errorf("-m %s %s%s %s: not translated", module, bang(neg), opt, v)
	}
	switch module {
	case "comment":
		if opt != "--comment" || neg {
			return bad()
		}
		p.comment = v
	case "tcp", "udp", "sctp":
		n, _ := nft.ProtoNumber(module)
		if p.proto != n || neg || (opt != "--dport" && opt != "--sport" && opt != "--destination-port" && opt != "--source-port") {
			return bad()
		}
		port, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return bad()
		}
		fld := nft.FieldDport
		if opt == "--sport" || opt == "--source-port" {
			fld = nft.FieldSport
		}
		p.matches = append(p.matches, nft.PortMatch{Field: fld, Port: uint16(port)})
	case "addrtype":
		if v != "LOCAL" || neg || (opt != "--dst-type" && opt != "--src-type") {
			return bad()
		}
		p.matches = append(p.matches, nft.FibLocal{Saddr: opt == "--src-type"})
	case "mark":
		if opt != "--mark" {
			return bad()
		}
		val, mask, err := markValue(v)
		if err != nil {
			return fmt.Errorf("-m mark --mark %s: %w", v, err)
		}
		p.matches = append(p.matches, nft.MarkMatch{Mask: mask, Value: val & mask, Neq: neg})
	case "conntrack":
		if opt != "--ctstate" || neg {
			return bad()
		}
		var st nft.CtState
		for _, s := range strings.Split(v, ",") {
			switch s {
			case "NEW":
				st |= nft.CtNew
			case "ESTABLISHED":
				st |= nft.CtEstablished
			case "RELATED":
				st |= nft.CtRelated
			case "INVALID":
				st |= nft.CtInvalid
			default:
				return bad()
			}
		}
		p.matches = append(p.matches, nft.CtStateMatch{States: st})
	case "statistic":
		switch {
		case opt == "--mode" && v == "random" && !neg:
		case opt == "--probability" && !neg:
			n, err := oneIn(v)
			if err != nil {
				return fmt.Errorf("-m statistic --probability %s: %w", v, err)
			}
			p.matches = append(p.matches, nft.Random{Mod: n, Value: 0})
		default:
			return bad()
		}
	case "recent":
		return rec.option(opt, v, neg, tr.fam)
	default:
		return bad()
	}
	return nil
}

// recent is one -m recent match being read.
type recent struct {
	name       string
	set, check bool
	seconds    time.Duration
}

var (
	fullMask4 = "255.255.255.255"
	fullMask6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
)

func (r *recent) option(opt, v string, neg bool, f ipfamily.Family) error {
	if neg {
		return fmt.Errorf("-m recent ! %s: not translated", opt)
	}
	switch opt {
	case "--name":
		r.name = v
	case "--set":
		r.set = true
	case "--rcheck":
		r.check = true
	case "--seconds":
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("-m recent --seconds %s: want a positive number", v)
		}
		r.seconds = time.Duration(n) * time.Second
	case "--reap", "--rsource":
		// --rsource is the default (the source address is recorded).
	case "--mask":
		if (f == ipfamily.IPv4 && v != fullMask4) || (f == ipfamily.IPv6 && v != fullMask6) {
			return fmt.Errorf("-m recent --mask %s: only the full mask is translated", v)
		}
	default:
		return fmt.Errorf("-m recent %s: not translated", opt)
	}
	return nil
}

// recentDone closes a -m recent match: --set is an update of the list's
// set, --rcheck a lookup in it (entries expire after --seconds).
func (tr *translator) recentDone(r *recent, p *ruleParse) error {
	if r.name == "" {
		r.name = "DEFAULT"
	}
	switch {
	case r.set == r.check:
		return fmt.Errorf("-m recent: want exactly one of --set and --rcheck")
	case r.set:
		p.matches = append(p.matches, nft.Update{Set: r.name, Fields: []nft.Field{nft.FieldSaddr}})
		if _, ok := tr.timeouts[r.name]; !ok {
			tr.timeouts[r.name] = 0
		}
	default:
		if r.seconds == 0 {
			return fmt.Errorf("-m recent --rcheck without --seconds: not translated")
		}
		p.matches = append(p.matches, nft.Lookup{Set: r.name, Fields: []nft.Field{nft.FieldSaddr}})
		tr.timeouts[r.name] = max(tr.timeouts[r.name], r.seconds)
	}
	return nil
}

// target translates "-j NAME OPTIONS..." (or -g with goto).
func (tr *translator) target(gotoChain bool, name string, opts []string, p *ruleParse) ([]nft.Expr, error) {
	o := map[string]string{}
	for i := 0; i < len(opts); i++ {
		k := opts[i]
		if !strings.HasPrefix(k, "--") {
			return nil, fmt.Errorf("-j %s: unexpected %q", name, k)
		}
		if k == "--random-fully" {
			o[k] = ""
			continue
		}
		if i+1 >= len(opts) {
			return nil, fmt.Errorf("-j %s %s without a value", name, k)
		}
		o[k] = opts[i+1]
		i++
	}
	only := func(allowed ...string) error {
		for k := range o {
			if !slices.Contains(allowed, k) {
				return fmt.Errorf("-j %s %s: not translated", name, k)
			}
		}
		return nil
	}
	if gotoChain {
		if c := tr.table.Chains[name]; c == nil || ipt.IsBuiltin(tr.table.Name, name) || len(o) > 0 {
			return nil, fmt.Errorf("-g %s: not a chain of table %s", name, tr.table.Name)
		}
		return []nft.Expr{nft.GotoTo(name)}, nil
	}
	switch name {
	case "ACCEPT", "DROP", "RETURN":
		if err := only(); err != nil {
			return nil, err
		}
		k := map[string]nft.VerdictKind{"ACCEPT": nft.Accept, "DROP": nft.Drop, "RETURN": nft.Return}[name]
		return []nft.Expr{nft.Verdict{Kind: k}}, nil
	case "REJECT":
		if err := only("--reject-with"); err != nil {
			return nil, err
		}
		switch with := o["--reject-with"]; with {
		case "", "icmp-port-unreachable", "icmp6-port-unreachable":
			return []nft.Expr{nft.Reject{}}, nil
		case "tcp-reset":
			if p.proto != nft.ProtoTCP {
				return nil, fmt.Errorf("-j REJECT --reject-with tcp-reset without -p tcp")
			}
			return []nft.Expr{nft.Reject{TCPReset: true}}, nil
		default:
			return nil, fmt.Errorf("-j REJECT --reject-with %s: not translated", with)
		}
	case "DNAT":
		if err := only("--to-destination"); err != nil {
			return nil, err
		}
		to, err := dnatTarget(o["--to-destination"])
		if err != nil {
			return nil, fmt.Errorf("-j DNAT --to-destination %q: %w", o["--to-destination"], err)
		}
		if to.Port() != 0 && p.proto == 0 {
			return nil, fmt.Errorf("-j DNAT to a port without -p")
		}
		return []nft.Expr{nft.DNAT{To: to}}, nil
	case "MASQUERADE":
		if err := only("--random-fully"); err != nil {
			return nil, err
		}
		_, fully := o["--random-fully"]
		return []nft.Expr{nft.Masquerade{FullyRandom: fully}}, nil
	case "MARK":
		if len(o) != 1 {
			return nil, fmt.Errorf("-j MARK: want one of --or-mark, --xor-mark, --set-xmark")
		}
		for k, v := range o {
			val, mask, err := markValue(v)
			if err != nil {
				return nil, fmt.Errorf("-j MARK %s %s: %w", k, v, err)
			}
			hasMask := strings.Contains(v, "/")
			switch {
			case k == "--or-mark" && !hasMask:
				return []nft.Expr{nft.SetMark{Op: nft.MarkOr, Value: val}}, nil
			case k == "--xor-mark" && !hasMask:
				return []nft.Expr{nft.SetMark{Op: nft.MarkXor, Value: val}}, nil
			// --set-xmark V/M is mark = (mark & ^M) ^ V.
			case k == "--set-xmark" && hasMask && mask == val:
				return []nft.Expr{nft.SetMark{Op: nft.MarkOr, Value: val}}, nil
			case k == "--set-xmark" && hasMask && mask == 0:
				return []nft.Expr{nft.SetMark{Op: nft.MarkXor, Value: val}}, nil
			}
			return nil, fmt.Errorf("-j MARK %s %s: not translated (only or and xor of bits)", k, v)
		}
	}
	if c := tr.table.Chains[name]; c != nil && !ipt.IsBuiltin(tr.table.Name, name) {
		if err := only(); err != nil {
			return nil, err
		}
		return []nft.Expr{nft.JumpTo(name)}, nil
	}
	return nil, fmt.Errorf("target %s: not translated (and not a chain of table %s)", name, tr.table.Name)
}

// policySource is the Source of the rule that stands for a built-in chain's
// policy: it starts with ":", as the chain's line in iptables-save does.
func policySource(chain, policy string) string {
	return ":" + chain + " " + policy + " (the chain's policy)"
}

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

// addrPrefix parses ADDR or ADDR/LEN of family f.
func addrPrefix(f ipfamily.Family, s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, err
		}
		p = nft.Host(a)
	}
	if ipfamily.Of(p.Addr()) != f {
		return p, fmt.Errorf("not an address of family %s", f)
	}
	return p.Masked(), nil
}

// dnatTarget parses ADDR, ADDR:PORT or [ADDR6]:PORT.
func dnatTarget(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("want ADDR[:PORT] (no ranges)")
	}
	return netip.AddrPortFrom(a, 0), nil
}

// markValue parses V or V/M (hexadecimal with 0x, or decimal); the mask
// defaults to all bits.
func markValue(s string) (val, mask uint32, err error) {
	v, m, hasMask := strings.Cut(s, "/")
	parse := func(x string) (uint32, error) {
		n, err := strconv.ParseUint(x, 0, 32)
		return uint32(n), err
	}
	if val, err = parse(v); err != nil {
		return 0, 0, fmt.Errorf("bad mark value")
	}
	mask = math.MaxUint32
	if hasMask {
		if mask, err = parse(m); err != nil {
			return 0, 0, fmt.Errorf("bad mark mask")
		}
	}
	return val, mask, nil
}

// kernelScale is the statistic match's precision: the kernel keeps the
// probability as a 31-bit fraction (xt_statistic: random < probability).
const kernelScale = 1 << 31

// oneIn returns n when p is 1/n to the kernel's precision.
func oneIn(s string) (uint32, error) {
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || p <= 0 || p > 1 {
		return 0, fmt.Errorf("want a probability in (0, 1]")
	}
	n := math.Round(1 / p)
	if n < 1 || n > math.MaxUint32 || math.Abs(p-1/n) > 1.0/kernelScale {
		return 0, fmt.Errorf("not 1/n for a whole n: the simulator weighs only such branches")
	}
	return uint32(n), nil
}

// Words splits an iptables rule spec into words as iptables-restore does: a
// double-quoted string (with \" and \\ escapes) is one word.
func Words(spec string) ([]string, error) {
	var out []string
	s := strings.TrimSpace(spec)
	for s != "" {
		if s[0] == '"' {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, fmt.Errorf("unterminated quote")
			}
			out = append(out, b.String())
			s = strings.TrimSpace(s[i+1:])
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = strings.TrimSpace(rest)
	}
	return out, nil
}
